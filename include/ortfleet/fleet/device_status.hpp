#pragma once
// What a fleet says of each device and of the tensors that crossed to its workers: the words every room
// of src/fleet speaks (src/fleet/core/device_status.cpp).
#include <cstdint>
#include <string>

#include "ortfleet/engine/devices.hpp"

namespace ortfleet {

/// Tensor bytes that crossed between this process and its worker processes, by how they travelled.
/// Device tensors on a worker's GPU cross by CUDA IPC reference (no copy at all); "staged" bytes are
/// device tensors that had to go through host memory (another GPU, memory the driver will not share).
struct TransferCounters {
  uint64_t inputs_host_bytes = 0;     ///< host inputs, through shared memory
  uint64_t inputs_ipc_bytes = 0;      ///< device inputs, read in place by the worker
  uint64_t inputs_staged_bytes = 0;   ///< device inputs copied to the host and back
  uint64_t outputs_host_bytes = 0;    ///< outputs returned in host memory
  uint64_t outputs_ipc_bytes = 0;     ///< device outputs, mapped in place from the worker
  uint64_t outputs_staged_bytes = 0;  ///< device outputs that came through host memory
  uint64_t ipc_opens = 0;             ///< worker allocations mapped into this process (once each, unless it
                                      ///< fell out of the 32 most recently used and was mapped again)
  TransferCounters& operator+=(const TransferCounters& o);
};

enum class DeviceState { pending, starting, ready, failed, stopped };
std::string to_string(DeviceState s);

struct DeviceStatus {
  Device device;
  DeviceState state = DeviceState::pending;
  std::string error;        ///< one line, when failed
  std::string provider;     ///< "cpu", "plugin", "builtin", "legacy"
  std::string provider_note;
  double ready_ms = 0;      ///< from Fleet::start() to ready
  int64_t ready_ns = 0;     ///< when it became ready, on the monotonic clock
  int pid = 0;              ///< the process the session lives in
  std::string profile_path; ///< ONNX Runtime's profile, when profiling was on
  bool resident = false;    ///< a worker pool already held this session: nothing was started
  uint64_t memory_bytes = 0;  ///< at ready: GPU memory in use on the device, or the process's resident set for CPU
  /// What the model cache did for this start ("hit", "miss", "no-gain", "busy", "rejected", "unwritable",
  /// "off"; "" for a resident session) and why, in words.
  std::string model_cache;
  std::string model_cache_note;
  /// A tiered start (SessionOptions::tiered_start): "" (none), "quick" (the quick session serves, the
  /// full one is in the making), "full" (switched in, tier_full_ms after ready) or "refused" (tier_note
  /// says why). A worker's devices say it as of ready; `pool status` and in-process sessions say it now.
  std::string tier;
  double tier_full_ms = 0;
  std::string tier_note;
  /// As `ortfleet start --json` prints it (one of its "devices").
  std::string to_json() const;
};

}  // namespace ortfleet
