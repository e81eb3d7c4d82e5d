#include "process/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/environment.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "base/termination_cleanup.hpp"
#include "base/unique_fd.hpp"

extern char** environ;

namespace ortfleet::detail {

namespace {
/// posix_spawn_file_actions as an owner.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};
}  // namespace

Spawned spawn_process(const SpawnRequest& request) {
  if (request.argv.empty()) throw Error("spawn_process needs a program");
  FileActions actions;
  std::vector<UniqueFd> moved;  // descriptors that already sit at their target number, moved away first
  for (const auto& [here, there] : request.descriptors) {
    int source = here;
    if (source == there) {
      // dup2 onto the same number would keep close-on-exec set: hand over a copy instead.
      moved.emplace_back(::fcntl(here, F_DUPFD_CLOEXEC, there + 1));
      source = moved.back().get();
    }
    posix_spawn_file_actions_adddup2(actions.get(), source, there);  // dup2 clears close-on-exec
  }

  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : request.unset_environment) env.erase(name);
  for (const auto& [k, v] : request.environment) env[k] = v;
  Spawned spawned;
  spawned.spawn_ns = monotonic_ns();
  env[env_name(EnvVar::spawn_ns)] = std::to_string(spawned.spawn_ns);
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = request.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A child starts with no signal blocked and the stop signals at their defaults, whatever the
  // spawning thread had: a pool server blocks SIGTERM and SIGINT in every thread (one thread waits for
  // them), and a worker that inherited that mask could not be stopped, nor clean up what it writes.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  // A stop signal this process was started ignoring (SIGINT in a script's background job, SIGHUP under
  // nohup) stays ignored in the child: what the caller is shielded from must not end its workers.
  // SIGTERM, what stops a child, is always at its default.
  sigset_t stop_signals = stop_signal_set();
  for (const int sig : {SIGINT, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) sigdelset(&stop_signals, sig);
  }
  posix_spawnattr_setsigdefault(&attributes, &stop_signals);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (request.new_session) flags |= POSIX_SPAWN_SETSID;
  if (request.new_process_group && !request.new_session) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, led by the child
  }
  posix_spawnattr_setflags(&attributes, flags);
  pid_t pid = -1;
  const int rc = request.search_path ? posix_spawnp(&pid, args[0].c_str(), actions.get(), &attributes, argv.data(), envp.data())
                                     : posix_spawn(&pid, args[0].c_str(), actions.get(), &attributes, argv.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    throw Error("cannot run " + args[0] + ": " + std::strerror(rc), "Check that it is installed and executable");
  }
  spawned.pid = pid;
  return spawned;
}

std::string describe_signal(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "was killed by signal " + (abbrev != nullptr ? "SIG" + std::string(abbrev) : std::to_string(sig)) + " (" + strsignal(sig) +
         ")" + (sig == SIGKILL ? ", possibly by the out-of-memory killer" : "");
}

std::string describe_exit_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return describe_signal(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace ortfleet::detail
