// Stop signals as a stop token for the commands that take one (interrupt.hpp).
#include "interrupt.hpp"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <iostream>
#include <thread>

namespace ortfleet::cli {

namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_first_signal{0};
std::atomic<int> g_wake_fd{-1};

/// Async-signal-safe: the first signal is handed to the watcher thread through a pipe; a second one
/// does what the signal does by default (the user asked twice).
void on_signal(int sig) {
  int none = 0;
  if (!g_first_signal.compare_exchange_strong(none, sig)) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  const char byte = static_cast<char>(sig);
  const int fd = g_wake_fd.load();
  if (fd >= 0) [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
}

const char* signal_words(int sig) {
  switch (sig) {
    case SIGINT: return "Ctrl-C (SIGINT)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP (its terminal closed)";
    default: return "a signal";
  }
}

/// The handlers, the pipe and the thread that turns a signal into a stop request, for one body's run.
class StopOnSignals {
 public:
  StopOnSignals() {
    g_first_signal = 0;
    if (::pipe2(pipe_, O_CLOEXEC) != 0) return;  // no pipe: the signals keep their defaults
    g_wake_fd = pipe_[1];
    watcher_ = std::thread([this] {
      char byte = 0;
      while (::read(pipe_[0], &byte, 1) < 0 && errno == EINTR) {
      }
      if (byte != 0) source_.request_stop();
    });
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction current {};
      ::sigaction(kSignals[i], nullptr, &current);
      if (current.sa_handler == SIG_IGN) continue;  // started ignoring it: a background job, nohup
      struct sigaction action {};
      action.sa_handler = on_signal;
      sigemptyset(&action.sa_mask);
      installed_[i] = ::sigaction(kSignals[i], &action, &previous_[i]) == 0;
    }
  }
  ~StopOnSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) {
      if (installed_[i]) ::sigaction(kSignals[i], &previous_[i], nullptr);
    }
    if (watcher_.joinable()) {
      const char wake = 0;
      [[maybe_unused]] const ssize_t written = ::write(pipe_[1], &wake, 1);
      watcher_.join();
    }
    g_wake_fd = -1;
    for (const int fd : pipe_) {
      if (fd >= 0) ::close(fd);
    }
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  std::stop_token token() const { return source_.get_token(); }

 private:
  int pipe_[2] = {-1, -1};
  std::stop_source source_;
  std::thread watcher_;
  std::array<bool, kSignals.size()> installed_{};
  std::array<struct sigaction, kSignals.size()> previous_{};
};

}  // namespace

int stoppable(const std::string& what, const std::function<int(std::stop_token)>& body) {
  int sig = 0;
  {
    const StopOnSignals signals;
    try {
      return body(signals.token());
    } catch (...) {
      sig = g_first_signal.load();
      if (sig == 0) throw;
    }
  }
  // The body's objects are gone by now: its processes stopped, its temporary folders removed.
  std::cerr << "ortfleet: " << what << " interrupted by " << signal_words(sig) << ": its processes stopped and its temporary files removed"
            << std::endl;
  return 128 + sig;
}

}  // namespace ortfleet::cli
