#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "ortfleet/error.hpp"
#include "ortfleet/timeline.hpp"
#include "system_paths.hpp"

extern char** environ;

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::string ChildResult::describe() const {
  std::string what = timed_out        ? "timed out"
                     : exit_code >= 0 ? "exited with code " + std::to_string(exit_code)
                     : signal > 0     ? std::string("was killed by signal SIG") + sigabbrev_np(signal) + " (" + strsignal(signal) + ")"
                                      : "was killed by a signal";
  std::string tail = stderr_tail;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const auto last = tail.rfind('\n');
  if (last != std::string::npos) tail = tail.substr(last + 1);  // the last line says most
  return tail.empty() ? what : what + ": " + tail;
}

ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env,
                      const std::string& report_prefix, double timeout_s) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

  ChildResult result;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra_env) env[k] = v;
  result.spawn_ns = monotonic_ns();
  env["ORTFLEET_SPAWN_NS"] = std::to_string(result.spawn_ns);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0].c_str(), &actions, nullptr, c_args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw Error("cannot run " + args[0] + ": " + std::strerror(rc), "Check that it is installed and executable");
  }

  std::string out_buffer;
  std::string err_buffer;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  const int64_t deadline = result.spawn_ns + static_cast<int64_t>(timeout_s * 1e9);
  while (open_fds > 0) {
    const int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
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
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

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
