#pragma once
// Paths in a start's plan made absolute where they are named: a process that works in "/" (a pool
// daemon, a worker, which never pin a user's folder) reads the files a job named from its own folder.
#include <string>

#include "fleet/local/local_start.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// `path` read from `folder` ("": this process's working folder); an absolute or empty path as it is.
std::string absolute_in(const std::string& path, const std::string& folder);
/// Every file a config names (warm-up inputs, custom-op libraries, the shared model cache) made absolute.
RunConfig with_absolute_paths(RunConfig config, const std::string& folder);
/// The same for a plan: its model, cache and profile folders, runtime and config.
LocalStartPlan with_absolute_paths(LocalStartPlan plan, const std::string& folder);
/// The relative paths in the variables this process and its children read (ortfleet's path variables,
/// TMPDIR, XDG_CACHE_HOME) made absolute, then "/" made the working folder. Returns the folder it
/// worked in before ("" when it could not be read); says nothing when chdir fails (it then stays).
std::string work_in_root();

}  // namespace ortfleet::detail
