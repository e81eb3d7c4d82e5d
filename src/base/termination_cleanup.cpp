#include "base/termination_cleanup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

namespace ortfleet {
namespace {

constexpr size_t kCleanupSlots = 8;
constexpr size_t kPathsPerCleanupSlot = 4;

/// One scope's paths. `state` is 0 (free), 1 (being filled) or 2 (active): the handler reads only an
/// active slot, whose paths are whole.
struct CleanupSlot {
  std::atomic<int> state{0};
  std::array<std::array<char, PATH_MAX>, kPathsPerCleanupSlot> paths{};
  size_t count = 0;
};
std::array<CleanupSlot, kCleanupSlots> cleanup_slots;
constexpr std::array<int, 3> kStopSignals = {SIGTERM, SIGINT, SIGHUP};

/// The files directly in a folder, in a signal handler: raw getdents64 and unlinkat, no allocation
/// (opendir and readdir may allocate).
void unlink_files_in(const char* path) {
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir < 0) return;
  alignas(8) char entries[4096];
  for (;;) {
    const long read = ::syscall(SYS_getdents64, dir, entries, sizeof(entries));
    if (read <= 0) break;
    for (long at = 0; at < read;) {
      struct Entry {  // linux_dirent64, as getdents64(2) lays it out
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* entry = reinterpret_cast<const Entry*>(entries + at);
      const bool dots = entry->name[0] == '.' && (entry->name[1] == '\0' || (entry->name[1] == '.' && entry->name[2] == '\0'));
      if (!dots) ::unlinkat(dir, entry->name, 0);
      at += entry->reclen;
    }
  }
  ::close(dir);
}

/// A folder with the files directly in it (a writer's hidden partial file among them). A listing that
/// races its own unlinks may miss a name: looked at again while the folder is not empty.
void remove_folder(const char* path) {
  for (int pass = 0; pass < 3; ++pass) {
    if (::rmdir(path) == 0 || (errno != ENOTEMPTY && errno != EEXIST)) return;
    unlink_files_in(path);
  }
}

void on_stop_signal(int sig) {
  for (auto& slot : cleanup_slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    for (size_t i = 0; i < slot.count; ++i) {
      if (::unlink(slot.paths[i].data()) != 0) remove_folder(slot.paths[i].data());
    }
  }
  // Then what the signal would have done: the process ends of it, so a parent sees the same status.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

RemoveOnTermination::RemoveOnTermination(const std::vector<std::string>& paths) {
  for (size_t i = 0; i < cleanup_slots.size(); ++i) {
    CleanupSlot& slot = cleanup_slots[i];
    int expected = 0;
    if (!slot.state.compare_exchange_strong(expected, 1)) continue;
    slot.count = 0;
    for (const auto& path : paths) {
      if (slot.count == kPathsPerCleanupSlot || path.size() >= PATH_MAX) break;
      std::memcpy(slot.paths[slot.count].data(), path.c_str(), path.size() + 1);
      ++slot.count;
    }
    slot.state.store(2, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

RemoveOnTermination::~RemoveOnTermination() { release(); }

void RemoveOnTermination::release() {
  if (slot_ < 0) return;
  cleanup_slots[static_cast<size_t>(slot_)].state.store(0, std::memory_order_release);
  slot_ = -1;
}

void install_termination_cleanup() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  for (const int sig : kStopSignals) {
    struct sigaction current {};
    // Started ignoring it (a background job's SIGINT, nohup's SIGHUP): it stays ignored, as the caller meant.
    if (sig != SIGTERM && ::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  // A process started with them blocked (a spawner's mask is inherited) would never see them.
  const sigset_t stop_signals = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

}  // namespace ortfleet
