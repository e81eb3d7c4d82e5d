#pragma once
// Starting a program as a fresh process: the one place that builds a child's environment and argv and
// calls posix_spawn (never fork: the parent may be a PyTorch process holding CUDA state), for worker
// processes and for the child runs of bench, profile and tune alike.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ortfleet::detail {

struct SpawnRequest {
  std::vector<std::string> argv;                      ///< argv[0] is the program
  std::map<std::string, std::string> environment;     ///< set (or replaced) on top of this process's environment
  std::vector<std::string> unset_environment;         ///< removed from it
  std::vector<std::pair<int, int>> descriptors;       ///< {fd here, fd in the child}; every other fd closes on exec
  bool search_path = false;                           ///< look argv[0] up on $PATH
  /// A session of its own (setsid): no terminal's signals reach it, and it outlives its parent's group.
  bool new_session = false;
  /// A process group of its own (led by the child), in the parent's session: a terminal's Ctrl-C goes
  /// to the foreground group only, so it reaches the parent and not the child, which the parent then
  /// stops in order (with the processes it started) by signalling the group.
  bool new_process_group = false;
};

struct Spawned {
  int pid = -1;
  int64_t spawn_ns = 0;  ///< monotonic clock, just before the spawn
};

/// Starts the program. Throws ortfleet::Error naming the program when it cannot be started.
Spawned spawn_process(const SpawnRequest& request);

/// How a process ended, from a waitpid() status: "exited with code 1", "was killed by signal SIGSEGV
/// (Segmentation fault)" (SIGKILL adds that the out-of-memory killer may have sent it).
std::string describe_exit_status(int status);
/// The same for a signal number alone.
std::string describe_signal(int signal);

}  // namespace ortfleet::detail
