#include "process/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "base/system_paths.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::string ChildResult::describe() const {
  std::string what = timed_out        ? "timed out"
                     : stopped        ? "was stopped on request"
                     : exit_code >= 0 ? "exited with code " + std::to_string(exit_code)
                     : signal > 0     ? describe_signal(signal)
                                      : "was killed by a signal";
  std::string tail = stderr_tail;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const auto last = tail.rfind('\n');
  if (last != std::string::npos) tail = tail.substr(last + 1);  // the last line says most
  return tail.empty() ? what : what + ": " + tail;
}

bool ChildResult::crashed() const {
  return !timed_out && !stopped && (signal == SIGSEGV || signal == SIGBUS || signal == SIGABRT || signal == SIGFPE || signal == SIGILL);
}

ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env,
                      const std::string& report_prefix, double timeout_s, std::stop_token stop) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  }
  ChildResult result;
  SpawnRequest request;
  request.argv = argv;
  request.environment = extra_env;
  request.descriptors = {{out_pipe[1], STDOUT_FILENO}, {err_pipe[1], STDERR_FILENO}};
  request.search_path = true;
  request.new_process_group = stop.stop_possible();
  pid_t pid = -1;
  try {
    const Spawned spawned = spawn_process(request);
    pid = spawned.pid;
    result.spawn_ns = spawned.spawn_ns;
  } catch (const Error&) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw;
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  std::string out_buffer;
  std::string err_buffer;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  const int64_t deadline = result.spawn_ns + static_cast<int64_t>(timeout_s * 1e9);
  // A stop is looked at every 100 ms; the child's group (it and what it started) gets SIGTERM, and
  // SIGKILL once the grace is over.
  const auto signal_child = [&](int sig) { ::kill(request.new_process_group ? -pid : pid, sig); };
  int64_t kill_at = 0;
  while (open_fds > 0) {
    if (!result.stopped && stop.stop_requested()) {
      result.stopped = true;
      signal_child(SIGTERM);
      kill_at = monotonic_ns() + static_cast<int64_t>(kStopGraceS * 1e9);
    }
    if (kill_at != 0 && monotonic_ns() >= kill_at) {
      signal_child(SIGKILL);
      break;
    }
    const int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) {
      result.timed_out = true;
      signal_child(SIGKILL);
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, stop.stop_possible() ? 100 : 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char chunk[65536];
      const ssize_t got = ::read(fds[i].fd, chunk, sizeof(chunk));
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      (i == 0 ? out_buffer : err_buffer).append(chunk, static_cast<size_t>(got));
      if (err_buffer.size() > (1u << 20)) err_buffer.erase(0, err_buffer.size() - (64u << 10));  // keep the tail
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  // Its output closed: it has ended, or closed it and runs on. Waited for until the deadline (or a
  // stop), then killed; after SIGKILL at most kReapWaitS (a process in an uninterruptible wait ends
  // only when that returns: it is left unreaped, and its result says it did not end in time).
  int status = 0;
  bool killed = result.timed_out || (kill_at != 0 && monotonic_ns() >= kill_at);  // SIGKILL sent above
  int64_t reap_by = killed ? monotonic_ns() + static_cast<int64_t>(kReapWaitS * 1e9) : 0;
  bool reaped = false;
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno == ECHILD)) {
      reaped = got == pid;
      break;
    }
    const int64_t now = monotonic_ns();
    if (!killed) {
      if (!result.stopped && stop.stop_requested()) {
        result.stopped = true;
        signal_child(SIGTERM);
        kill_at = now + static_cast<int64_t>(kStopGraceS * 1e9);
      }
      if (now >= deadline || (kill_at != 0 && now >= kill_at)) {
        if (!result.stopped) result.timed_out = true;
        signal_child(SIGKILL);
        killed = true;
        reap_by = now + static_cast<int64_t>(kReapWaitS * 1e9);
      }
    } else if (now >= reap_by) {
      if (!result.stopped) result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // an exiting child is reaped within a tick
  }
  result.exit_code = reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = reaped && WIFSIGNALED(status) ? WTERMSIG(status) : 0;

  std::istringstream lines(out_buffer);
  std::string line;
  while (std::getline(lines, line)) {
    if (result.report_line.empty() && !report_prefix.empty() && line.rfind(report_prefix, 0) == 0) {
      result.report_line = line;
    } else {
      result.stdout_text += line + "\n";
    }
  }
  result.stderr_tail = err_buffer.size() > 4096 ? err_buffer.substr(err_buffer.size() - 4096) : err_buffer;
  return result;
}

std::optional<std::string> find_sibling_executable(const std::string& name) {
  const fs::path here = own_binary_dir();
  for (const auto& c : {here / name, here / "bin" / name, here / ".." / "bin" / name}) {
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c).string();
  }
  if (auto path = env_var("PATH")) {
    std::stringstream ss(*path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      const fs::path c = fs::path(dir) / name;
      if (!dir.empty() && ::access(c.c_str(), X_OK) == 0) return c.string();
    }
  }
  return std::nullopt;
}

std::string ortfleet_executable(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (auto found = find_sibling_executable("ortfleet")) return *found;
  throw Error("the ortfleet executable was not found next to this program or on PATH",
              "Put it on PATH, or reinstall ortfleet (the Python package carries it in ortfleet/bin)");
}

}  // namespace ortfleet::detail
