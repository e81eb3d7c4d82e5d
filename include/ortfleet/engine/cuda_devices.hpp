#pragma once
// The GPUs the NVIDIA driver reports, how many this process may use, and which CUDA ordinal a fleet's
// cuda:N is in a worker that sees only its own GPU (src/engine/cuda/cuda_devices.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"

namespace ortfleet {

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;          ///< "0000:18:00.0"
  uint64_t total_memory = 0;       ///< bytes
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::optional<bool> mig_enabled; ///< from NVML when available
  std::optional<bool> persistence_mode;  ///< from NVML: the driver keeps the GPU initialised between processes
  std::string architecture() const { return "sm_" + std::to_string(compute_major * 10 + compute_minor); }
};

struct CudaDriverInfo {
  bool loaded = false;          ///< libcuda.so.1 found and cuInit succeeded
  std::string library_path;
  std::string error;            ///< why not, when !loaded
  int driver_api_version = 0;   ///< cuDriverGetVersion, e.g. 13000
  std::string driver_version;   ///< NVML's "580.159.04", when NVML is present
  double init_ms = 0;           ///< how long cuInit took in this process
  std::vector<GpuInfo> gpus;
};

/// Loads the NVIDIA driver library, initialises it (cuInit) and lists the GPUs. Never throws: on a
/// machine without a GPU it returns loaded=false and the reason.
const CudaDriverInfo& probe_cuda_driver();

/// The number of GPUs this process may use, found without initialising CUDA (cuInit costs 0.1-0.5 s
/// and a fleet's parent process never needs it): the /dev/nvidiaN device nodes, limited by
/// CUDA_VISIBLE_DEVICES. probe_cuda_driver() gives the exact list.
int gpu_count();

/// What a worker process for `device` should set CUDA_VISIBLE_DEVICES to so that it sees only that
/// GPU: the matching entry of this process's CUDA_VISIBLE_DEVICES (an index, a UUID or a MIG
/// instance), or the ordinal when that is unset. nullopt for a CPU device, or when the entry does not
/// exist (the worker then sees what this process sees and fails as it would).
std::optional<std::string> narrowed_visible_devices(const Device& device);

/// In a worker that sees only its own GPU (narrowed_visible_devices), the fleet's cuda:N is this
/// process's CUDA ordinal 0. Devices keep their fleet names (errors, timelines, status say cuda:N);
/// every driver and ONNX Runtime call takes cuda_ordinal(device).
void set_narrowed_device(const Device& device);
int cuda_ordinal(const Device& device);

}  // namespace ortfleet
