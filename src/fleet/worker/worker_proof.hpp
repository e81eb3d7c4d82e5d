#pragma once
// Before a pool adopts a worker a job hands over, proof that it is one: what the job says (a pid and a
// channel) proves nothing, and the pool would watch, list and one day SIGKILL whatever process the pid
// names (a forged hand-over named a `sleep`).
#include <memory>
#include <string>

#include "process/pidfd.hpp"

namespace ortfleet::detail {

/// Proves that `channel_fd` leads to process `pid` and that it runs `executable` (the pool's worker
/// executable): a pidfd is held on `pid` from before the proof (a new process that takes the pid later
/// cannot pass for it); the channel's answer to a status request carries the kernel's credentials of
/// its sender (SO_PASSCRED), which must be `pid`; /proc/PID/exe must be `executable` (same file).
/// Returns the pidfd to watch and signal the worker by. Throws ortfleet::Error saying what failed.
std::unique_ptr<PidFd> prove_worker(int channel_fd, int pid, const std::string& executable);

}  // namespace ortfleet::detail
