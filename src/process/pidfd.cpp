#include "process/pidfd.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

PidFd::PidFd(int pid) : pid_(pid) {
  // glibc 2.36 has no wrapper on every distribution this builds on: the system calls themselves.
  fd_ = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!fd_) {
    throw Error("cannot watch process " + std::to_string(pid) + ": " + std::strerror(errno),
                errno == ENOSYS ? "The kernel is older than Linux 5.3 (no pidfd_open)" : "It is gone");
  }
}

bool PidFd::exited(double wait_s) const {
  pollfd p{fd_.get(), POLLIN, 0};
  int n = 0;
  while ((n = ::poll(&p, 1, static_cast<int>(wait_s * 1000))) < 0 && errno == EINTR) {
  }
  return n > 0;
}

bool PidFd::signal(int signal) const { return ::syscall(SYS_pidfd_send_signal, fd_.get(), signal, nullptr, 0) == 0; }

}  // namespace ortfleet::detail
