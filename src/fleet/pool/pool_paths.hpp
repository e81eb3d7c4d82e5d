#pragma once
// Paths in what a pool is asked to do, made absolute where they are named: a pool daemon works in "/"
// (it never pins a user's folder), and a worker handed over by a job named its files from the job's.
#include <string>

#include "fleet/local/plan_paths.hpp"

namespace ortfleet::detail {

/// The folder process `pid` works in ("" when it cannot be read).
std::string working_folder_of(int pid);

}  // namespace ortfleet::detail
