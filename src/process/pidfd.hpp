#pragma once
// A process this one did not spawn, watched through a pidfd (Linux 5.3+): it can be told from a new
// process with the same pid, signalled, and seen to exit, though only its parent may wait for it. A
// warm pool watches the workers a job handed over to it this way.
#include <string>

#include "base/unique_fd.hpp"

namespace ortfleet::detail {

class PidFd {
 public:
  /// Opens `pid`. Throws ortfleet::Error when it is gone or the kernel has no pidfd_open.
  explicit PidFd(int pid);
  int pid() const { return pid_; }
  /// Whether it has exited, waiting at most `wait_s` (0: just look).
  bool exited(double wait_s = 0) const;
  /// Sends `signal` (false when it had exited already).
  bool signal(int signal) const;

 private:
  int pid_;
  UniqueFd fd_;
};

}  // namespace ortfleet::detail
