#pragma once
// Paths in what a pool is asked to do, made absolute where they are named: a pool daemon works in "/"
// (it never pins a user's folder), and a worker handed over by a job named its files from the job's.
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
/// The folder process `pid` works in ("" when it cannot be read).
std::string working_folder_of(int pid);

}  // namespace ortfleet::detail
