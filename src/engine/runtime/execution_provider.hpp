#pragma once
// What an execution provider is to ortfleet (llama.cpp's backend registry is the model). Providers are
// known by name ("cpu", "cuda"; "tensorrt" would be one more) and stacked per device: a session on a
// device attaches the providers the config stacks in front of the device's own (TensorRT in front of
// CUDA, both on `cuda` devices), then the device's own, which owns the device: its memory, its driver,
// its workers. Each provider owns its options (their checks, ONNX Runtime's keys for them) and how they
// mark a cache entry's key. Each lives in a room of its own (engine/cpu/, engine/cuda/) and implements
// this; engine/providers/ lists them, builds a device's stack and answers what the rest of ortfleet asks
// of a device: a capability (device_has(device, Capability::device_memory)), never whether it is a GPU.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// What a device's providers offer beyond running a session. Code above the providers asks for the one
/// it needs; a device of a provider that offers it (a ROCm GPU, say) then gets the feature, and one that
/// does not is never taken for a CPU. Code that calls CUDA's own libraries (the driver, NVML, cuDNN's
/// record, the CUDA EP's library, the `cuda` section of a config) asks Device::is_cuda() instead.
enum class Capability {
  /// Memory of its own apart from the host's (DeviceProvider::memory()): tensors may live there, runs
  /// bind them in place, padding is made there; its sessions compute off the host's cores, their host
  /// threads mostly waiting. What a "GPU" is in ortfleet's words.
  device_memory,
  /// Memory another process on the machine reaches in place (DeviceProvider::sharing()).
  memory_sharing,
  /// Its idle workers' device state moved into host memory and back (DeviceProvider::parking(), whose
  /// unavailable() says why not on this machine now).
  worker_parking,
  /// A run captured once and replayed whole (CUDA graphs: the config's `cuda.cuda_graph`).
  graph_capture,
  /// A model's weights uploaded to the device once and used in place by each of its sessions there
  /// (the shape sessions', a tiered start's two).
  weight_sharing,
  /// A first run of each input shape searches and plans kernels (cuDNN's convolutions): what a tiered
  /// start, the measured shape policy and priming before a timed stream pay off against.
  kernel_search,
};
inline constexpr Capability kCapabilities[] = {Capability::device_memory,  Capability::memory_sharing, Capability::worker_parking,
                                               Capability::graph_capture,  Capability::weight_sharing, Capability::kernel_search};
inline const char* capability_name(Capability capability) {
  switch (capability) {
    case Capability::device_memory: return "device_memory";
    case Capability::memory_sharing: return "memory_sharing";
    case Capability::worker_parking: return "worker_parking";
    case Capability::graph_capture: return "graph_capture";
    case Capability::weight_sharing: return "weight_sharing";
    case Capability::kernel_search: return "kernel_search";
  }
  return "?";
}

/// The memory a provider's devices have of their own, apart from the host's (a GPU's): what tensors on
/// a device, padding and copies between host and device go through. Every call names the device whose
/// memory it is; a call the driver refuses throws ortfleet::Error naming it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  /// `bytes` of uninitialised memory on `device` (at a fixed address, for inputs that must stay put).
  virtual void* allocate(const Device& device, size_t bytes) const = 0;
  virtual void release(const Device& device, void* pointer) const = 0;
  virtual void copy_to_device(const Device& device, void* dst, const void* src, size_t bytes) const = 0;
  virtual void copy_to_host(const Device& device, void* dst, const void* src, size_t bytes) const = 0;
  /// Within the device's memory; returns once the copy is done.
  virtual void copy_on_device(const Device& device, void* dst, const void* src, size_t bytes) const = 0;
  /// `height` rows of `width` bytes, rows `src_pitch` and `dst_pitch` bytes apart, between host memory and
  /// the device's or within it; returns once the copy is done (a padded or cropped tensor's rows).
  virtual void copy_rows(const Device& device, void* dst, bool dst_on_device, size_t dst_pitch, const void* src, bool src_on_device,
                         size_t src_pitch, size_t width, size_t height) const = 0;
  /// Sets `count` elements of `pattern_size` bytes (1, 2, 4 or 8) at `dst` to `pattern`.
  virtual void fill(const Device& device, void* dst, size_t count, const void* pattern, size_t pattern_size) const = 0;
  /// Waits for all work queued on the device by anyone (a tensor another library wrote on its own stream).
  virtual void synchronize(const Device& device) const = 0;
  /// Host memory at `pointer` (page-aligned) pinned for the device's copies while the result lives; throws
  /// ortfleet::Error when refused (the locked-memory limit).
  virtual std::shared_ptr<void> pin_host(const Device& device, void* pointer, size_t bytes) const = 0;
  /// ONNX Runtime's description of this memory, for tensors bound in place (IO binding).
  virtual Ort::MemoryInfo ort_memory(const Device& device) const = 0;
};

/// Device memory that another process on the same machine reaches in place, without a copy (CUDA IPC).
class DeviceMemorySharing {
 public:
  virtual ~DeviceMemorySharing() = default;
  /// What another process needs to reach `pointer`: the handle of the allocation holding it, and where in
  /// that allocation it lies.
  struct Handle {
    std::array<std::byte, 64> bytes{};
    uint64_t offset = 0;
  };
  /// Throws ortfleet::Error when that memory cannot be shared (memory not from the driver's plain
  /// allocator, such as PyTorch's expandable segments).
  virtual Handle handle(const Device& device, const void* pointer) const = 0;
  /// The allocation behind `handle` (made by another process on the same device), mapped into this one
  /// while the result lives; the pointer is its base. Throws ortfleet::Error when the driver refuses.
  virtual std::shared_ptr<std::byte> open(const Device& device, const std::array<std::byte, 64>& handle) const = 0;
};

/// Parking an idle worker process: its device state moved into its own host memory, the device's memory
/// released, and later put back as it was (a pool's workers between jobs). Called by the process that
/// manages the worker; the worker does nothing to take part.
class ProcessParking {
 public:
  virtual ~ProcessParking() = default;
  /// Why workers of this provider cannot be parked here ("a CPU worker holds no GPU memory to release",
  /// a driver too old); nothing when they can.
  virtual std::optional<std::string> unavailable() const = 0;
  /// Parks process `pid`, waiting at most `timeout_s` for the work it has submitted. Throws ortfleet::Error
  /// saying which step failed; the process then runs on as before whenever the driver allows it.
  virtual void park(int pid, double timeout_s) const = 0;
  /// Puts `pid`'s state back. Throws ortfleet::Error when it cannot: the process is then unusable.
  virtual void unpark(int pid) const = 0;
};

/// What a worker process for a device gets beyond the fleet's own settings.
struct WorkerEnvironment {
  std::map<std::string, std::string> variables;
  /// The worker sees only its own device, as the provider's device 0; it is told so (use_narrowed).
  bool narrowed = false;
  /// Which device it sees, as the provider's variable names it (CUDA_VISIBLE_DEVICES's value), when narrowed.
  std::string visible_devices;
};

/// What every provider of a device's stack does for a session: the part of a provider that stands in
/// front of another one (TensorRT in front of CUDA) as well as the device's own.
class ExecutionProvider {
 public:
  virtual ~ExecutionProvider() = default;

  /// Its name: the registry's key, and the config's (`providers.NAME` holds the options of one stacked
  /// in front of a device's own). Lower case, no space: "cpu", "cuda", "tensorrt".
  virtual const char* name() const = 0;
  /// Its name as ONNX Runtime knows it ("CUDAExecutionProvider").
  virtual const char* ort_name() const = 0;
  /// The devices it runs on: a provider in front of another runs on that one's kind (TensorRT: cuda).
  virtual Device::Kind device_kind() const = 0;
  /// The device's own provider: whether it offers `capability`. One in front of it: whether the device
  /// keeps it with this one in front (TensorRT's engines hold weights of their own: no weight_sharing).
  virtual bool offers(Capability capability) const = 0;

  // --- its options, and how they mark a cache entry ---
  /// Refuses options of its own it does not take (the config's `providers.NAME`, ONNX Runtime's keys):
  /// throws ortfleet::Error naming the key and what it takes (the stack adds where: `providers.NAME`). A
  /// device's own provider takes its options from a section of its own (`cuda`) and refuses any here.
  virtual void check_options(const std::map<std::string, std::string>& options) const = 0;
  /// Its settings in `config` as ONNX Runtime's keys (what it is attached with; a cache bundle's manifest).
  virtual std::vector<std::pair<std::string, std::string>> provider_options(const RunConfig& config) const = 0;
  /// Its settings in `config` that change an optimised graph, as they enter the model cache's key ("|nhwc=1";
  /// "" for none): an entry made with other settings is another entry. The stack adds the name of each
  /// provider in front of the device's own (ProviderStack::cache_mark).
  virtual std::string cache_mark(const RunConfig& config) const = 0;

  // --- a process ---
  /// Sets what the provider reads once per process, before its first use (CUDA_MODULE_LOADING): only what
  /// `config` asks for and the environment does not already hold. Returns the variables written.
  virtual std::vector<std::string> apply_environment(const RunConfig& config) const = 0;
  /// Whether a fleet's start prepares it beside the runtime's load (its library loaded ahead with preload(),
  /// registered with prepare(); a device provider also starts its driver and opens its devices there).
  /// False: its first session prepares it, in order.
  virtual bool prepares_ahead() const = 0;
  /// Loads the provider's library into the process without initialising anything, so that the load
  /// overlaps the runtime's; prepare() later finds it loaded. Returns false when it loaded none.
  virtual bool preload() const = 0;
  /// Loads and registers what the provider needs in this process, once (later calls cost nothing);
  /// returns the path a session will be attached by ("plugin"), for the start-up timeline; "" where there
  /// is nothing to prepare.
  virtual std::string prepare() const = 0;
  /// Whether prepare() has run in this process.
  virtual bool prepared() const = 0;

  // --- a session ---
  /// Appends the provider for `device` to `options` with `config`'s settings. Throws ortfleet::Error
  /// naming the device.
  virtual ProviderAttachment attach(Ort::SessionOptions& options, const Device& device, const RunConfig& config) const = 0;
};

/// The provider that owns a kind of device, the last of each of its devices' stacks: the devices
/// themselves, their memory, their driver, the workers that run on them.
class DeviceProvider : public ExecutionProvider {
 public:
  // --- its devices ---
  /// How many devices this process may use, found without initialising a driver (0 where there are none).
  /// A provider with devices of its own (memory() not null) offers each; the CPU's count is not asked.
  virtual int device_count() const = 0;
  /// What an optimised graph made on `device` is made for, and only runs on: "cpu-<hash of the CPU's
  /// model and instruction sets>", "cuda-sm_90".
  virtual std::string device_class(const Device& device) const = 0;
  /// Memory in use where `device` keeps a session's state: the whole device's, or this process's
  /// resident set for the CPU.
  virtual uint64_t memory_in_use(const Device& device) const = 0;
  /// The name of `device`'s memory arena in ONNX Runtime's run option that shrinks arenas
  /// ("memory.enable_memory_arena_shrinkage": "cpu:0", "gpu:1").
  virtual std::string arena_name(const Device& device) const = 0;

  // --- what it has (offers() says which of these a device has) ---
  /// Memory of its own (a GPU's): tensors may live there, runs bind them in place, padding is made there.
  /// Null: the devices compute in host memory, on the host's cores.
  virtual const DeviceMemory* memory() const = 0;
  /// Memory another process reaches in place; null where device tensors cross processes through host memory.
  virtual const DeviceMemorySharing* sharing() const = 0;
  /// Parking its workers' device state between jobs (unavailable() says why not).
  virtual const ProcessParking& parking() const = 0;

  // --- a process, a worker ---
  /// The settings of its own a fleet's start gives `tuned` where the user left them at their defaults
  /// (CUDA: one hardware queue per context), beside the fleet's own (fleet/local: tuned_for_fleet).
  virtual void tune_for_fleet(RunConfig& tuned) const = 0;
  /// The environment of a worker process for `device` (`executable`): with `narrow`, one that sees only
  /// that device, where the provider can.
  virtual WorkerEnvironment worker_environment(const Device& device, const std::string& executable, bool narrow) const = 0;
  /// In a worker told it is narrowed: `device` is this process's device 0 from now on.
  virtual void use_narrowed(const Device& device) const = 0;
  /// Starts the driver (cuInit), where prepares_ahead(): a fleet's start runs it beside the runtime's load,
  /// then opens each device for the process. Never throws: a driver that cannot start is found when a
  /// device is opened.
  virtual void start_driver() const = 0;
  /// Whether this process already holds `device` ready for sessions (a GPU's context made): opening it
  /// again costs nothing, and the start-up timeline leaves it out.
  virtual bool device_open(const Device& device) const = 0;
  /// Makes `device` ready for sessions (a GPU's context), held while the result lives; null where there is
  /// nothing to hold. Throws ortfleet::Error naming the device when it cannot.
  virtual std::shared_ptr<void> open_device(const Device& device) const = 0;
  /// Makes `device` ready for sessions for the rest of the process (a fleet's start: its sessions, and a
  /// warm worker's later ones, find it made). Throws ortfleet::Error naming the device when it cannot.
  virtual void open_device_for_process(const Device& device) const = 0;
};

}  // namespace ortfleet::detail
