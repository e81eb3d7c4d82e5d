#pragma once
// Devices: what a session runs on ("cpu", "cuda:0") and device lists as users write them. Which
// devices a machine has is its execution providers' to say (ortfleet/engine/device_selection.hpp; the
// GPUs the NVIDIA driver reports: ortfleet/engine/cuda_devices.hpp).
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet {

struct Device {
  /// The execution provider a device belongs to (each has a room of its own in src/engine: cpu/, cuda/).
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  ///< CUDA ordinal, or the instance number of a CPU session

  /// One device as written by to_string() ("cpu", "cpu:2", "cuda:1"); not checked against the machine.
  static Device parse(std::string_view text);
  static Device cpu(int instance = 0) { return {Kind::cpu, instance}; }
  static Device cuda(int ordinal) { return {Kind::cuda, ordinal}; }
  /// A CUDA device: what code that calls CUDA's own libraries asks (the driver, NVML, cuDNN's record, the
  /// CUDA EP's library, a config's `cuda` section). What a device has (memory of its own, parking, CUDA
  /// graphs, shared weights) is asked of its providers instead (detail::device_has, Capability), so that a
  /// device of another provider gets what its provider offers and is never taken for a CPU.
  bool is_cuda() const { return kind == Kind::cuda; }
  /// The old name of is_cuda(), kept while src/fleet/pool's two calls (NVML's memory of a worker) move to
  /// a question of the provider; use is_cuda() or a capability.
  bool is_gpu() const { return is_cuda(); }
  std::string to_string() const;  ///< "cuda:1", "cpu" (instance 0) or "cpu:2"
  bool operator==(const Device&) const = default;
  auto operator<=>(const Device&) const = default;
};

/// A device list as parse_devices() reads it back: "cuda:0,cuda:1".
std::string to_string(const std::vector<Device>& devices);

/// Parses a device list: "all" (every GPU, else one CPU session), "0,1,3", "cuda:0,cuda:2",
/// "0-3", "cpu", "cpu*4" (four CPU sessions). Throws ortfleet::Error for unknown or missing devices,
/// naming the GPUs that exist.
std::vector<Device> parse_devices(std::string_view spec, int gpu_count);

/// Whether a device list says "all" (or nothing, which means the same).
bool means_all_devices(std::string_view spec);

/// How a session's execution provider was attached: "cpu", or for CUDA "plugin", "builtin" or "legacy".
struct ProviderAttachment {
  std::string path;
  std::string library;             ///< the provider's library, when one was used
  std::string note;                ///< why a fallback was taken, or options the path ignores
};

/// Refuses more CPU sessions than the CPUs this process may use (its affinity mask, at most what Slurm
/// gave the job): each is a worker process with its own memory in a fleet or a pool, and sessions past
/// the cores only take turns on them (`cpu*99` on 2 cores left 298 processes and a load of 165).
/// select_devices, Fleet and WorkerPool check their lists with it. Throws ortfleet::Error naming the
/// count, the limit and what to ask for.
void check_cpu_devices_fit(const std::vector<Device>& devices);

}  // namespace ortfleet
