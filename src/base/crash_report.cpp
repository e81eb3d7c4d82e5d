#include "base/crash_report.hpp"
#include "base/environment.hpp"
#include "ortfleet/base/terminal_text.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace ortfleet {
namespace {

constexpr int kSlots = 64;
constexpr size_t kTextBytes = 1024;
constexpr std::array<int, 5> kFatalSignals = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

/// One activity that may crash: its thread and the line's text after the signal's name.
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 active
  long thread = 0;
  uint64_t sequence = 0;  // later scopes of a thread are nested in earlier ones: the latest is innermost
  std::array<char, kTextBytes> text{};
  std::array<char, 512> record{};  // "" or where the crash is remembered
};
std::atomic<uint64_t> next_sequence{1};
std::array<Slot, kSlots> slots;
std::array<struct sigaction, kFatalSignals.size()> previous{};
int crash_fd = -1;
std::atomic<bool> enabled{false};  // ORTFLEET_CRASH_HANDLER=0 turns the handler and the scopes off (to measure their cost)

long this_thread() { return ::syscall(SYS_gettid); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (abort)";
    default: return "a fatal signal";
  }
}

}  // namespace

std::string crash_text(const std::string& phase, const std::string& model, const std::string& device, const std::string& locate_flags) {
  std::string locate = "ortfleet doctor " + model + " --locate-crash --device " + (device.empty() ? "cpu" : device) + locate_flags;
  return terminal_text("inside ONNX Runtime during " + phase + " of " + model + " on " + device + "; the process dies of it. Find the node that crashes: " +
                       locate) +
         "\n";
}

std::string library_crash_text(const std::string& what, const std::string& library) {
  return "while loading " + what + " " + terminal_text(library) + ", in the library's own code or the loader's; the process dies of it. "
         "The library is damaged, or not built for this machine and this ONNX Runtime: give another one\n";
}

namespace {

void write_from_handler(int fd, const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

void write_line(int sig, const char* tail, const char* record) {
  const int record_fd = record[0] != '\0' ? ::open(record, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
  for (const int fd : {STDERR_FILENO, crash_fd, record_fd}) {
    if (fd < 0) continue;
    write_from_handler(fd, "ortfleet: ", 10);
    write_from_handler(fd, signal_name(sig), std::strlen(signal_name(sig)));
    write_from_handler(fd, " ", 1);
    write_from_handler(fd, tail, std::strlen(tail));
  }
  if (record_fd >= 0) ::close(record_fd);
}

/// Whether slot `i` is the innermost active scope of its thread.
bool innermost(int i) {
  for (const auto& s : slots) {
    if (s.state.load(std::memory_order_acquire) == 2 && s.thread == slots[i].thread && s.sequence > slots[i].sequence) return false;
  }
  return true;
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const long me = this_thread();
  bool mine = false;
  for (const auto& s : slots) mine = mine || (s.state.load(std::memory_order_acquire) == 2 && s.thread == me);
  // The crashing thread's innermost activity; on a thread nobody marked (ONNX Runtime's pool),
  // every thread's innermost one.
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].state.load(std::memory_order_acquire) == 2 && (!mine || slots[i].thread == me) && innermost(i)) {
      write_line(sig, slots[i].text.data(), slots[i].record.data());
    }
  }
  // Hand the signal to whoever had it before: a chained handler, or the default action.
  for (size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] != sig) continue;
    const struct sigaction& old = previous[i];
    if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != nullptr) {
      ::sigaction(sig, &old, nullptr);
      old.sa_sigaction(sig, info, context);
      return;
    }
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != nullptr) {
      ::sigaction(sig, &old, nullptr);
      old.sa_handler(sig);
      return;
    }
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // delivered when the handler returns (a synchronous fault re-faults with the default)
}

}  // namespace

CrashScope::CrashScope(const std::string& text, const std::string& record_path) {
  if (!enabled.load(std::memory_order_relaxed)) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    slots[i].thread = this_thread();
    slots[i].sequence = next_sequence.fetch_add(1);
    size_t n = std::min(text.size(), kTextBytes - 2);
    std::memcpy(slots[i].text.data(), text.data(), n);
    if (n < text.size()) slots[i].text[n++] = '\n';  // cut to fit, still one line
    slots[i].text[n] = '\0';
    const size_t r = record_path.size() < slots[i].record.size() ? record_path.size() : 0;  // a path cut short would be wrong
    std::memcpy(slots[i].record.data(), record_path.data(), r);
    slots[i].record[r] = '\0';
    slots[i].state.store(2, std::memory_order_release);
    slot_ = i;
    return;
  }
  // More than kSlots activities at once: this one goes unnamed (the others still print).
}

CrashScope::~CrashScope() {
  if (slot_ >= 0) slots[slot_].state.store(0, std::memory_order_release);
}

void install_crash_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!detail::env_on(detail::EnvVar::crash_handler).value_or(true)) return;
    enabled = true;
    if (const auto fd = detail::env_number(detail::EnvVar::crash_fd)) crash_fd = static_cast<int>(*fd);
    struct sigaction action {};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ::sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kFatalSignals.size(); ++i) ::sigaction(kFatalSignals[i], &action, &previous[i]);
  });
}

}  // namespace ortfleet
