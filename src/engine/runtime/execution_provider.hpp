#pragma once
// What an execution provider is to ortfleet (llama.cpp's backend registry is the model): the devices it
// offers, what it has beyond running a session (memory of its own, memory other processes reach in
// place, parking an idle worker), what a process sets before its first use, and how a session attaches
// it. Each provider lives in a room of its own (engine/cpu/, engine/cuda/) and implements this;
// engine/providers/ lists them, the one place a provider is named. Code above asks a device's provider
// what it has (provider_for(device).memory()) rather than whether the device is a GPU.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

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

class ExecutionProvider {
 public:
  virtual ~ExecutionProvider() = default;

  /// The devices it serves (Device::kind) and its name as ONNX Runtime knows it ("CUDAExecutionProvider").
  virtual Device::Kind kind() const = 0;
  virtual const char* ort_name() const = 0;

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

  // --- what it has ---
  /// Memory of its own (a GPU's): tensors may live there, runs bind them in place, padding is made there.
  /// Null: the devices compute in host memory, on the host's cores.
  virtual const DeviceMemory* memory() const = 0;
  /// Memory another process reaches in place; null where device tensors cross processes through host memory.
  virtual const DeviceMemorySharing* sharing() const = 0;
  /// Parking its workers' device state between jobs (unavailable() says why not).
  virtual const ProcessParking& parking() const = 0;

  // --- a process, a worker, a session ---
  /// Sets what the provider reads once per process, before its first use (CUDA_MODULE_LOADING): only what
  /// `config` asks for and the environment does not already hold. Returns the variables written.
  virtual std::vector<std::string> apply_environment(const RunConfig& config) const = 0;
  /// The environment of a worker process for `device` (`executable`): with `narrow`, one that sees only
  /// that device, where the provider can.
  virtual WorkerEnvironment worker_environment(const Device& device, const std::string& executable, bool narrow) const = 0;
  /// In a worker told it is narrowed: `device` is this process's device 0 from now on.
  virtual void use_narrowed(const Device& device) const = 0;
  /// Loads and registers what the provider needs in this process, once (later calls cost nothing);
  /// returns the path a session will be attached by ("plugin"), for the start-up timeline; "" where there
  /// is nothing to prepare.
  virtual std::string prepare() const = 0;
  /// Whether prepare() has run in this process.
  virtual bool prepared() const = 0;
  /// Whether this process already holds `device` ready for sessions (a GPU's context made): opening it
  /// again costs nothing, and the start-up timeline leaves it out.
  virtual bool device_open(const Device& device) const = 0;
  /// Makes `device` ready for sessions (a GPU's context), held while the result lives; null where there is
  /// nothing to hold. Throws ortfleet::Error naming the device when it cannot.
  virtual std::shared_ptr<void> open_device(const Device& device) const = 0;
  /// Appends the provider for `device` to `options` with `config`'s settings. Throws ortfleet::Error
  /// naming the device.
  virtual ProviderAttachment attach(Ort::SessionOptions& options, const Device& device, const RunConfig& config) const = 0;
  /// `config`'s settings of this provider that change an optimised graph, as they enter the model cache's
  /// key ("|nhwc=1"; "" for none), and as ONNX Runtime's keys (a cache bundle's manifest).
  virtual std::string graph_key(const RunConfig& config) const = 0;
  virtual std::vector<std::pair<std::string, std::string>> provider_options(const RunConfig& config) const = 0;
};

}  // namespace ortfleet::detail
