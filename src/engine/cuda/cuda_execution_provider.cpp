#include "engine/cuda/cuda_execution_provider.hpp"

#include <cstdlib>

#include "engine/cuda/cuda_driver.hpp"
#include "engine/cuda/cuda_environment.hpp"
#include "engine/cuda/cuda_provider.hpp"
#include "engine/cuda/cudnn_choices.hpp"
#include "engine/cuda/process_checkpoint.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_provider.hpp"

namespace ortfleet::detail {

namespace {

class CudaMemory : public DeviceMemory {
 public:
  void* allocate(const Device& device, size_t bytes) const override { return driver().allocate(cuda_ordinal(device), bytes); }
  void release(const Device& device, void* pointer) const override { driver().release(cuda_ordinal(device), pointer); }
  void copy_to_device(const Device& device, void* dst, const void* src, size_t bytes) const override {
    driver().copy_to_device(cuda_ordinal(device), dst, src, bytes);
  }
  void copy_to_host(const Device& device, void* dst, const void* src, size_t bytes) const override {
    driver().copy_to_host(cuda_ordinal(device), dst, src, bytes);
  }
  void copy_on_device(const Device& device, void* dst, const void* src, size_t bytes) const override {
    driver().copy_on_device(cuda_ordinal(device), dst, src, bytes);
  }
  void copy_rows(const Device& device, void* dst, bool dst_on_device, size_t dst_pitch, const void* src, bool src_on_device, size_t src_pitch,
                 size_t width, size_t height) const override {
    driver().copy_rows(cuda_ordinal(device), dst, dst_on_device, dst_pitch, src, src_on_device, src_pitch, width, height);
  }
  void fill(const Device& device, void* dst, size_t count, const void* pattern, size_t pattern_size) const override {
    driver().fill(cuda_ordinal(device), dst, count, pattern, pattern_size);
  }
  void synchronize(const Device& device) const override { driver().synchronize(cuda_ordinal(device)); }
  std::shared_ptr<void> pin_host(const Device& device, void* pointer, size_t bytes) const override {
    return driver().register_host(cuda_ordinal(device), pointer, bytes);
  }
  Ort::MemoryInfo ort_memory(const Device& device) const override {
    return Ort::MemoryInfo("Cuda", OrtArenaAllocator, cuda_ordinal(device), OrtMemTypeDefault);
  }

 private:
  static CudaDriver& driver() { return CudaDriver::instance(); }
};

class CudaIpc : public DeviceMemorySharing {
 public:
  Handle handle(const Device& device, const void* pointer) const override {
    const auto handle = CudaDriver::instance().ipc_handle(cuda_ordinal(device), pointer);
    return {handle.bytes, handle.offset};
  }
  std::shared_ptr<std::byte> open(const Device& device, const std::array<std::byte, 64>& handle) const override {
    const std::shared_ptr<CudaDriver::IpcMapping> mapping = CudaDriver::instance().open_ipc(cuda_ordinal(device), handle);
    return {mapping, mapping->base()};  // the mapping stays open while the base is used
  }
};

class CudaParking : public ProcessParking {
 public:
  std::optional<std::string> unavailable() const override {
    const ProcessCheckpoint& api = ProcessCheckpoint::instance();
    if (!api.available()) return api.why_unavailable();
    return std::nullopt;
  }
  void park(int pid, double timeout_s) const override { ProcessCheckpoint::instance().park(pid, timeout_s); }
  void unpark(int pid) const override { ProcessCheckpoint::instance().unpark(pid); }
};

class CudaExecutionProvider : public DeviceProvider {
 public:
  const char* name() const override { return "cuda"; }
  const char* ort_name() const override { return "CUDAExecutionProvider"; }
  Device::Kind device_kind() const override { return Device::Kind::cuda; }
  bool offers(Capability) const override { return true; }  // each of them (execution_provider.hpp)

  void check_options(const std::map<std::string, std::string>& options) const override {
    if (!options.empty()) {
      throw Error("CUDA's execution provider takes its options from the config's `cuda` section, not from `providers.cuda`",
                  "Move them there (`cuda.extra` for ONNX Runtime's keys without a field of their own)");
    }
  }
  std::vector<std::pair<std::string, std::string>> provider_options(const RunConfig& config) const override {
    return config.cuda.provider_options();
  }
  std::string cache_mark(const RunConfig& config) const override { return "|nhwc=" + std::string(config.cuda.prefer_nhwc ? "1" : "0"); }

  std::vector<std::string> apply_environment(const RunConfig& config) const override { return apply_cuda_environment(config); }
  // Its EP library, cuInit and each GPU's context overlap the runtime's load in a fleet's start.
  bool prepares_ahead() const override { return true; }
  bool preload() const override { return preload_cuda_ep_library(); }
  std::string prepare() const override { return prepare_cuda_provider().path; }
  bool prepared() const override { return cuda_provider_prepared(); }
  ProviderAttachment attach(Ort::SessionOptions& options, const Device& device, const RunConfig& config) const override {
    return attach_cuda(options, cuda_ordinal(device), config.cuda);
  }

  int device_count() const override { return gpu_count(); }
  std::string device_class(const Device& device) const override {
    // Only this GPU's compute capability: enumerating every GPU (and NVML) cost 70-100 ms per start.
    auto& driver = CudaDriver::instance();
    std::string device_class = "cuda";
    if (driver.ok()) {
      device_class += "-sm_" + std::to_string(driver.attribute(cuda_ordinal(device), CudaDriver::kComputeCapabilityMajor) * 10 +
                                             driver.attribute(cuda_ordinal(device), CudaDriver::kComputeCapabilityMinor));
    }
    return device_class;
  }
  uint64_t memory_in_use(const Device& device) const override {
    const auto [free_bytes, total_bytes] = CudaDriver::instance().memory_info(cuda_ordinal(device));
    return total_bytes - free_bytes;
  }
  std::string arena_name(const Device& device) const override { return "gpu:" + std::to_string(cuda_ordinal(device)); }

  const DeviceMemory* memory() const override { return &memory_; }
  const DeviceMemorySharing* sharing() const override { return &ipc_; }
  const ProcessParking& parking() const override { return parking_; }

  void tune_for_fleet(RunConfig& tuned) const override {
    // One hardware queue per context, where neither the config nor the environment says otherwise:
    // 1 made an H100's context 2x cheaper to create than the default 8 (options.hpp).
    if (tuned.session.cuda_max_connections == 0 && std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") == nullptr) {
      tuned.session.cuda_max_connections = 1;
    }
  }
  WorkerEnvironment worker_environment(const Device& device, const std::string& executable, bool narrow) const override {
    // A GPU worker keeps cuDNN's choices across processes (engine/cuda/cudnn_choices.hpp).
    WorkerEnvironment out{cudnn_choices_environment(executable), false, ""};
    if (narrow) {
      if (auto visible = narrowed_visible_devices(device)) {
        out.variables["CUDA_VISIBLE_DEVICES"] = *visible;
        out.narrowed = true;
        out.visible_devices = *visible;
      }
    }
    return out;
  }
  void use_narrowed(const Device& device) const override { set_narrowed_device(device); }
  void start_driver() const override { CudaDriver::instance(); }  // cuInit, once per process; its error waits for the first use
  bool device_open(const Device& device) const override { return CudaDriver::instance().holds_context(cuda_ordinal(device)); }
  std::shared_ptr<void> open_device(const Device& device) const override {
    // Creating the primary context here, outside ONNX Runtime, makes its cost visible and lets a fleet
    // create the contexts of several GPUs in parallel.
    return std::make_shared<CudaDriver::PrimaryContext>(cuda_ordinal(device));
  }
  void open_device_for_process(const Device& device) const override { CudaDriver::PrimaryContext(cuda_ordinal(device)).keep_for_process(); }

 private:
  CudaMemory memory_;
  CudaIpc ipc_;
  CudaParking parking_;
};

}  // namespace

const DeviceProvider& cuda_execution_provider() {
  static const CudaExecutionProvider provider;
  return provider;
}

}  // namespace ortfleet::detail
