#pragma once
// Ctrl-C for the commands that start children and set things up around them (bench, profile, tune):
// SIGINT, SIGTERM or SIGHUP asks the run to stop instead of ending this process at once, so that it ends
// its child start in order and takes down what it set up (a bench's warm pools, its folders in $TMPDIR),
// as Python's Ctrl-C does; then the process ends by that signal, as a shell expects of Ctrl-C. A second
// signal ends it at once. Without this, Ctrl-C left a bench's pools running and its folders behind.
#include <signal.h>

#include <atomic>
#include <stop_token>
#include <thread>

namespace ortfleet::cli {

class StopOnSignals {
 public:
  /// Blocks the signals in this thread, and so in every thread it starts later (made before any), and
  /// waits for them on a thread of its own. Spawned children start with them unblocked (spawn.cpp).
  StopOnSignals();
  /// Unblocks them; a signal that came ends the process here, by that signal (after what the command
  /// said), so that its parent sees what a shell's Ctrl-C means.
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  /// What the run is given as its stop (BenchOptions::stop, ...).
  std::stop_token token() const { return stop_.get_token(); }

 private:
  std::stop_source stop_;
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  sigset_t signals_{};
  sigset_t old_mask_{};
  std::thread waiter_;
};

}  // namespace ortfleet::cli
