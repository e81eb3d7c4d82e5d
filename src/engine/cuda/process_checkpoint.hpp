#pragma once
// Parking another process's GPU state through the driver's checkpoint API (cuCheckpointProcess*,
// NVIDIA driver r570 and later): lock its CUDA calls, move its device memory into its own host memory
// and release the GPU (checkpoint); later put it back on the same GPU (restore) and let its calls go on
// (unlock). Its contexts, loaded kernels and cuDNN's plans come back as they were, so its sessions run
// at full speed at once. Called from a process that manages the other (a pool server); the other
// process does nothing to take part.
#include <optional>
#include <string>

namespace ortfleet::detail {

class ProcessCheckpoint {
 public:
  /// The driver's checkpoint API, or why there is none here ("the NVIDIA driver 550.54 has no
  /// cuCheckpointProcessLock: it needs r570 or later").
  static ProcessCheckpoint& instance();
  bool available() const { return unavailable_.empty(); }
  const std::string& why_unavailable() const { return unavailable_; }

  enum class State { running, locked, checkpointed, failed, unknown };
  /// The process's state as the driver sees it; unknown when the driver cannot tell (not a CUDA process).
  State state(int pid) const;

  /// Locks `pid`'s CUDA calls (waiting at most `timeout_s` for the work it has submitted) and moves its
  /// device memory into host memory. Throws ortfleet::Error saying which step failed and why; the
  /// process is then running again (unlocked) whenever the driver allows it.
  void park(int pid, double timeout_s) const;
  /// Puts `pid`'s device memory back on its GPU and lets its CUDA calls go on. Throws ortfleet::Error
  /// when the driver cannot: the process is then unusable (State::failed) and should be ended.
  void unpark(int pid) const;

 private:
  ProcessCheckpoint();
  using CUresult = int;
  CUresult (*lock_)(int, void*) = nullptr;
  CUresult (*checkpoint_)(int, void*) = nullptr;
  CUresult (*restore_)(int, void*) = nullptr;
  CUresult (*unlock_)(int, void*) = nullptr;
  CUresult (*get_state_)(int, int*) = nullptr;
  std::string unavailable_;
};

std::string to_string(ProcessCheckpoint::State state);

}  // namespace ortfleet::detail
