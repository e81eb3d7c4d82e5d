#include "engine/cuda/process_checkpoint.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "engine/cuda/cuda_driver.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

namespace {
// The argument structs of cuda.h (CUDA 12.8+), zeroed: their reserved fields must be.
struct LockArgs {
  unsigned int timeout_ms = 0;
  unsigned int reserved0 = 0;
  uint64_t reserved1[7] = {};
};
struct ReservedArgs {
  uint64_t reserved[8] = {};
};
struct RestoreArgs {
  void* gpu_pairs = nullptr;  // the same GPUs: no remapping
  unsigned int gpu_pairs_count = 0;
  char reserved[52 - sizeof(void*)] = {};
  uint64_t reserved1 = 0;
};
constexpr int kNotSupported = 801;
constexpr const char* kPersistenceHint =
    "Restoring needs persistence mode (nvidia-smi -pm 1) or cuInit in the restoring process; the worker is replaced";
}  // namespace

ProcessCheckpoint& ProcessCheckpoint::instance() {
  static ProcessCheckpoint api;
  return api;
}

ProcessCheckpoint::ProcessCheckpoint() {
  CudaDriver& driver = CudaDriver::instance();
  // Restore needs cuInit in this process (or persistence mode); instance() has run it.
  if (!driver.ok()) {
    unavailable_ = "no usable NVIDIA driver: " + driver.error();
    return;
  }
  const auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(driver.optional_entry_point(name));
    if (fn == nullptr && unavailable_.empty()) {
      const int v = driver.driver_version();
      unavailable_ = fmt::format("the NVIDIA driver (CUDA {}.{}) has no {}: parking needs driver r570 or later", v / 1000, v % 1000 / 10, name);
    }
  };
  bind(lock_, "cuCheckpointProcessLock");
  bind(checkpoint_, "cuCheckpointProcessCheckpoint");
  bind(restore_, "cuCheckpointProcessRestore");
  bind(unlock_, "cuCheckpointProcessUnlock");
  bind(get_state_, "cuCheckpointProcessGetState");
}

ProcessCheckpoint::State ProcessCheckpoint::state(int pid) const {
  if (!available()) return State::unknown;
  int state = -1;
  if (get_state_(pid, &state) != 0) return State::unknown;
  switch (state) {
    case 0: return State::running;
    case 1: return State::locked;
    case 2: return State::checkpointed;
    case 3: return State::failed;
    default: return State::unknown;
  }
}

void ProcessCheckpoint::park(int pid, double timeout_s) const {
  if (!available()) throw Error("cannot park process " + std::to_string(pid) + ": " + unavailable_);
  const CudaDriver& driver = CudaDriver::instance();
  LockArgs lock_args;
  lock_args.timeout_ms = static_cast<unsigned int>(std::max(1.0, timeout_s * 1000));
  if (const CUresult r = lock_(pid, &lock_args); r != 0) {
    throw Error(fmt::format("process {} could not be locked for a checkpoint within {:g} s: {}", pid, timeout_s, driver.describe(r)),
                "Its GPU work did not finish in time; it stays as it is and is tried again later");
  }
  ReservedArgs checkpoint_args;
  if (const CUresult r = checkpoint_(pid, &checkpoint_args); r != 0) {
    ReservedArgs unlock_args;
    unlock_(pid, &unlock_args);  // back to running: the process keeps its GPU memory
    throw Error(fmt::format("the driver could not checkpoint process {}: {}", pid, driver.describe(r)),
                r == kNotSupported ? "It holds memory the driver cannot checkpoint (CUDA IPC memory before r610, managed memory); "
                                     "it keeps its GPU memory"
                                   : "It keeps its GPU memory");
  }
}

void ProcessCheckpoint::unpark(int pid) const {
  if (!available()) throw Error("cannot restore process " + std::to_string(pid) + ": " + unavailable_);
  const CudaDriver& driver = CudaDriver::instance();
  if (state(pid) == State::checkpointed) {
    RestoreArgs restore_args;
    if (const CUresult r = restore_(pid, &restore_args); r != 0) {
      throw Error(fmt::format("the driver could not restore process {} onto its GPU: {}", pid, driver.describe(r)),
                  r == 2 ? "The GPU has no room for it now (out of memory); the worker is replaced" : kPersistenceHint);
    }
  }
  ReservedArgs unlock_args;
  if (const CUresult r = unlock_(pid, &unlock_args); r != 0 && state(pid) != State::running) {
    throw Error(fmt::format("the driver could not unlock process {} after its restore: {}", pid, driver.describe(r)), kPersistenceHint);
  }
}

std::string to_string(ProcessCheckpoint::State state) {
  switch (state) {
    case ProcessCheckpoint::State::running: return "running";
    case ProcessCheckpoint::State::locked: return "locked";
    case ProcessCheckpoint::State::checkpointed: return "checkpointed";
    case ProcessCheckpoint::State::failed: return "failed";
    case ProcessCheckpoint::State::unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace ortfleet::detail
