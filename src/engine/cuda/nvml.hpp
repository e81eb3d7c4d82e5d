#pragma once
// NVML (libnvidia-ml.so.1), loaded at run time as the driver is: what the driver API does not tell,
// the driver's release, a GPU's MIG and persistence modes, and how much GPU memory each process
// holds (the driver's cuMemGetInfo counts only the whole device). Never on a start's path: loading and
// initialising NVML costs tens of milliseconds.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ortfleet::detail {

class Nvml {
 public:
  /// Loaded and initialised once; ok() is false on a machine without it.
  static const Nvml& instance();
  bool ok() const { return ok_; }

  /// "580.159.04", when NVML answers.
  std::optional<std::string> driver_version() const;

  struct GpuModes {
    std::optional<bool> mig_enabled;
    std::optional<bool> persistence_mode;
  };
  /// The modes of the GPU at `pci_bus_id` (as cuDeviceGetPCIBusId writes it), each unknown where NVML
  /// does not say.
  GpuModes modes(const std::string& pci_bus_id) const;

  /// The GPU memory each process holds, summed over every GPU, by process id as NVML reports it (the
  /// pid namespace of the driver: in a container with its own pid namespace no pid of ours may match).
  /// Empty when NVML is missing. A checkpointed (parked) process holds none and is not listed.
  std::map<int, uint64_t> memory_by_process() const;

 private:
  Nvml();
  bool ok_ = false;
  void* library_ = nullptr;
};

}  // namespace ortfleet::detail
