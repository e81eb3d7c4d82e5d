#include "fleet/worker/worker_proof.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <filesystem>

#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

namespace {
constexpr const char* kOwnWorkersHint = "Hand over your own workers";
/// How long the handed-over worker has to answer the status request (it is idle: a job just let go of it).
constexpr double kAnswerTimeoutS = 10;

/// The pid the kernel says sent the answer to a status request on `channel_fd`, or -1 when nothing
/// answers as a worker does in time.
int answering_pid(int channel_fd) {
  MessageChannel probe(UniqueFd(::fcntl(channel_fd, F_DUPFD_CLOEXEC, 0)), "the handed-over worker");
  if (probe.fd() < 0) return -1;
  int on = 1;
  if (::setsockopt(probe.fd(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) return -1;
  int sender = -1;
  try {
    probe.send(request_of(message::status));
    const Received reply = probe.receive(deadline_in(kAnswerTimeoutS, monotonic_ns()));
    if (reply.kind == Received::Kind::message && event_of(reply.message.body) == message::status.answer) sender = reply.message.sender_pid.value_or(-1);
  } catch (const std::exception&) {
    sender = -1;  // not a socket, or a peer that is gone: no worker
  }
  int off = 0;  // the channel's later messages go without credentials, as before
  ::setsockopt(probe.fd(), SOL_SOCKET, SO_PASSCRED, &off, sizeof(off));
  return sender;
}

/// Whether `pid` runs the very file `executable` names.
bool runs(int pid, const std::string& executable, std::string& running) {
  const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  std::error_code ec;
  running = std::filesystem::read_symlink(exe, ec).string();
  struct stat theirs {};
  struct stat ours {};
  return ::stat(exe.c_str(), &theirs) == 0 && ::stat(executable.c_str(), &ours) == 0 && theirs.st_dev == ours.st_dev &&
         theirs.st_ino == ours.st_ino;
}
}  // namespace

std::unique_ptr<PidFd> prove_worker(int channel_fd, int pid, const std::string& executable) {
  if (pid <= 1) throw Error(fmt::format("pid {} is not a worker's", pid), kOwnWorkersHint);
  std::unique_ptr<PidFd> watched;
  try {
    watched = std::make_unique<PidFd>(pid);
  } catch (const Error& e) {
    throw Error(fmt::format("worker pid {} cannot be watched: {}", pid, e.what_failed()), kOwnWorkersHint);
  }
  const int says = answering_pid(channel_fd);
  if (says != pid) {
    throw Error(fmt::format("the handed-over channel leads to {}, not to worker pid {}", says > 0 ? "pid " + std::to_string(says) : "no worker", pid),
                kOwnWorkersHint);
  }
  std::string running;
  if (!runs(pid, executable, running)) {
    throw Error(fmt::format("process {} runs {}, not the worker executable {}", pid, running.empty() ? "something unreadable" : running, executable),
                kOwnWorkersHint);
  }
  // The pid answered while the pidfd held it: it is the same process, unless it has exited since.
  if (watched->exited()) throw Error(fmt::format("worker pid {} exited while it was handed over", pid), kOwnWorkersHint);
  return watched;
}

}  // namespace ortfleet::detail
