#pragma once
// Files a process is writing that must not outlive it when it is told to stop. An ortfleet process
// that writes such files (a worker filling the model cache in the background, or priming its libraries
// with throwaway models) installs a handler for SIGTERM, SIGINT and SIGHUP; while a RemoveOnTermination
// lives, that handler removes its paths (async-signal-safe: unlink a file; a folder with the files
// directly in it) and then lets the signal end the process as it would have. A process
// that never installs the handler (a user's Python job) keeps its own signal handling: the scopes then
// do nothing.
#include <signal.h>

#include <string>
#include <vector>

namespace ortfleet {

class RemoveOnTermination {
 public:
  /// Registers `paths` (at most 4, each shorter than PATH_MAX; a folder goes with the files directly
  /// in it, not deeper) until the scope ends or release().
  explicit RemoveOnTermination(const std::vector<std::string>& paths);
  ~RemoveOnTermination();
  RemoveOnTermination(const RemoveOnTermination&) = delete;
  RemoveOnTermination& operator=(const RemoveOnTermination&) = delete;
  /// The files are in place for good (published): a signal from now on leaves them.
  void release();

 private:
  int slot_ = -1;
};

/// SIGTERM, SIGINT and SIGHUP: what tells an ortfleet process to stop (the handler's signals, and the
/// ones a spawned child starts with unblocked and at their defaults).
sigset_t stop_signal_set();

/// Installs the handler once per process (later calls do nothing) and unblocks the stop signals in the
/// calling thread (and so in the threads it starts later): a spawner's blocked mask must not make them miss.
void install_termination_cleanup();

}  // namespace ortfleet
