// Ctrl-C asks a bench, profile or tune to stop in order (stop_signals.hpp).
#include "stop_signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <ctime>

namespace ortfleet::cli {

namespace {
/// What stops an ortfleet process: a terminal's Ctrl-C, a kill, a closed terminal; each unless this
/// process was started with it ignored (nohup, a shell script's `&`), which stays so: a blocked signal
/// is never discarded, so waiting for an ignored one would take it.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (::sigaction(signal, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&set, signal);
  }
  return set;
}

/// Ends this process by `signal` as its default action does.
[[noreturn]] void end_by(int signal) {
  ::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal);
  ::_exit(128 + signal);  // a disposition the process inherited as ignored
}
}  // namespace

StopOnSignals::StopOnSignals() : signals_(stop_signals()) {
  ::pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
  waiter_ = std::thread([this] {
    while (!done_) {
      const timespec slice{0, 50'000'000};  // looks at done_ every 50 ms
      const int got = ::sigtimedwait(&signals_, nullptr, &slice);
      if (got <= 0) continue;
      if (signal_.exchange(got) != 0) end_by(got);  // a second one: at once
      stop_.request_stop();
    }
  });
}

StopOnSignals::~StopOnSignals() {
  done_ = true;
  waiter_.join();
  if (const int got = signal_.load(); got != 0) end_by(got);
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace ortfleet::cli
