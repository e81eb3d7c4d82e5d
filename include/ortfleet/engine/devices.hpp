#pragma once
// Devices: what a session runs on ("cpu", "cuda:0"), device lists as users write them, and the GPUs
// the NVIDIA driver reports.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  ///< CUDA ordinal, or the instance number of a CPU session

  /// One device as written by to_string() ("cpu", "cpu:2", "cuda:1"); not checked against the machine.
  static Device parse(std::string_view text);
  static Device cpu(int instance = 0) { return {Kind::cpu, instance}; }
  static Device cuda(int ordinal) { return {Kind::cuda, ordinal}; }
  bool is_gpu() const { return kind == Kind::cuda; }
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

/// The devices a device list means here, and for "all" why: what `--devices` and a Fleet without
/// devices use.
struct DeviceSelection {
  std::vector<Device> devices;
  /// For "all" under a Slurm allocation, what it chose and why, in words: "the 2 GPUs Slurm gave job
  /// 123 (CUDA_VISIBLE_DEVICES=0,1)", "the CPU: Slurm gave job 123 no GPU"; "" otherwise.
  std::string reason;
};

/// parse_devices(spec, gpu_count()), except that under a Slurm allocation (SLURM_JOB_ID set) "all"
/// means the GPUs Slurm gave this job or step, as it exports them (CUDA_VISIBLE_DEVICES, else
/// SLURM_STEP_GPUS or SLURM_JOB_GPUS), and the CPU where it gave none (never the GPUs of the node
/// that other jobs were given). Explicit lists are taken as written.
DeviceSelection select_devices(std::string_view spec);

/// Refuses more CPU sessions than the CPUs this process may use (its affinity mask, at most what Slurm
/// gave the job): each is a worker process with its own memory in a fleet or a pool, and sessions past
/// the cores only take turns on them (`cpu*99` on 2 cores left 298 processes and a load of 165).
/// select_devices, Fleet and WorkerPool check their lists with it. Throws ortfleet::Error naming the
/// count, the limit and what to ask for.
void check_cpu_devices_fit(const std::vector<Device>& devices);

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

/// The device a one-device command uses when none is named: GPU 0 if there is a GPU, else the CPU.
Device default_device();

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
/// Memory in use where `device` keeps a session's state: the whole GPU's (as the driver reports it),
/// or this process's resident set for the CPU.
uint64_t memory_in_use(const Device& device);

void set_narrowed_device(const Device& device);
int cuda_ordinal(const Device& device);

}  // namespace ortfleet
