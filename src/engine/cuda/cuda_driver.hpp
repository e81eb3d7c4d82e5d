#pragma once
// The NVIDIA driver API, loaded with dlopen (libcuda.so.1) so that ortfleet builds and runs where no
// CUDA is installed. Only the handful of entry points ortfleet needs are declared; their C ABI has
// been stable since CUDA 4.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <functional>
#include <string>

namespace ortfleet::detail {

class CudaDriver {
 public:
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = struct CUctx_st*;

  /// The process-wide driver; check ok() before use.
  static CudaDriver& instance();

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& library_path() const { return path_; }
  double init_ms() const { return init_ms_; }

  int device_count() const;
  int driver_version() const;
  std::string device_name(int ordinal) const;
  std::string device_uuid(int ordinal) const;
  std::string pci_bus_id(int ordinal) const;
  uint64_t total_memory(int ordinal) const;
  int attribute(int ordinal, int attribute) const;

  /// One retain of a device's primary context (the one the CUDA runtime, and so ONNX Runtime, uses),
  /// released by its destructor. Creating the context is the expensive part of a GPU's start-up.
  class PrimaryContext {
   public:
    PrimaryContext() = default;  ///< holds none
    /// Retains the primary context of `ordinal` and makes it current on the calling thread. Throws
    /// ortfleet::Error when there is no driver or it refuses.
    explicit PrimaryContext(int ordinal);
    ~PrimaryContext();
    PrimaryContext(PrimaryContext&& other) noexcept;
    PrimaryContext& operator=(PrimaryContext&& other) noexcept;
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;

    bool held() const { return ordinal_ >= 0; }
    CUcontext get() const { return context_; }
    /// Lets go of this owner without releasing: the context stays made for the rest of the process
    /// (later starts in it skip making it again).
    void keep_for_process() { ordinal_ = -1; }

   private:
    void reset();
    int ordinal_ = -1;
    CUcontext context_ = nullptr;
  };
  /// Whether this process already holds the primary context of `ordinal` through this class.
  bool holds_context(int ordinal) const;
  /// Waits for all work queued on the primary context of `ordinal`, by any stream.
  void synchronize(int ordinal) const;
  /// Device memory in the primary context of `ordinal` (for inputs that must stay at fixed addresses).
  void* allocate(int ordinal, size_t bytes) const;
  void release(int ordinal, void* pointer) const;
  void copy_to_device(int ordinal, void* dst, const void* src, size_t bytes) const;
  /// Copies device memory to the host, in the primary context of `ordinal`.
  void copy_to_host(int ordinal, void* dst, const void* src, size_t bytes) const;
  /// Copies device memory to device memory of the same GPU and waits for the copy to finish.
  void copy_on_device(int ordinal, void* dst, const void* src, size_t bytes) const;
  /// Copies `height` rows of `width` bytes, rows `src_pitch` and `dst_pitch` bytes apart
  /// (cuMemcpy2D), between host memory and GPU `ordinal`'s or within it, and waits for the copy: a
  /// padded or cropped tensor's rows.
  void copy_rows(int ordinal, void* dst, bool dst_on_device, size_t dst_pitch, const void* src, bool src_on_device, size_t src_pitch,
                 size_t width, size_t height) const;
  /// Sets `count` elements of `pattern_size` bytes (1, 2, 4 or 8) at `dst` to `pattern` (cuMemsetD*).
  void fill(int ordinal, void* dst, size_t count, const void* pattern, size_t pattern_size) const;
  /// Fills `bytes` of device memory at `dst` in large copies from pinned staging buffers, at the bus's
  /// speed rather than that of many small copies from pageable memory: `fill(staging, offset, length)`
  /// writes bytes [offset, offset + length) of what belongs at `dst` into `staging`, while the
  /// previous chunk is on its way. Each chunk is filled by several threads at once (one core's memcpy
  /// from the page cache moves a fraction of what the bus can), so `fill` is called concurrently on
  /// disjoint ranges. Returns when every byte has arrived, with where the time went.
  struct StagedUploadTimes {
    double staging_ms = 0;  ///< allocating and freeing the pinned staging buffers
    double fill_ms = 0;     ///< filling them (on the calling thread's clock, helpers included)
    double wait_ms = 0;     ///< waiting for copies in flight
  };
  StagedUploadTimes upload_staged(int ordinal, void* dst, uint64_t bytes,
                                  const std::function<void(std::byte* staging, uint64_t offset, uint64_t length)>& fill) const;
  /// Host-to-device bandwidth of GPU `ordinal` in GB/s: `bytes` copied from pinned host memory in one
  /// cuMemcpyHtoD, the best of `repeats` (the bus's speed, which weights cannot beat).
  double pinned_upload_gb_per_s(int ordinal, size_t bytes, int repeats = 3) const;
  /// Free and total device memory, from the primary context of `ordinal`.
  std::pair<uint64_t, uint64_t> memory_info(int ordinal) const;
  /// Sets the per-thread stack size of the primary context of `ordinal` (cuCtxSetLimit): the driver
  /// reserves it for every thread the GPU can hold at once (1 KB: ~264 MB on an H200), grows it again
  /// when a kernel needs more, and never shrinks it by itself. Returns the size now in force. Throws
  /// ortfleet::Error when the driver refuses.
  size_t set_stack_size(int ordinal, size_t bytes) const;

  std::string describe(CUresult r) const;
  /// An entry point this class does not bind (a newer driver's), or null when the driver lacks it.
  void* optional_entry_point(const char* name) const;

  /// What another process needs to reach device memory in place (cuIpcGetMemHandle): the handle of
  /// the allocation that holds a pointer, and where in that allocation the pointer lies.
  struct IpcHandle {
    std::array<std::byte, 64> bytes{};
    uint64_t offset = 0;
  };
  /// The handle of the memory at `pointer` on GPU `ordinal`. Throws ortfleet::Error when it cannot be
  /// shared: memory not from cuMemAlloc/cudaMalloc (virtual-memory or stream-ordered pools, such as
  /// PyTorch's expandable segments), or a GPU without IPC.
  IpcHandle ipc_handle(int ordinal, const void* pointer) const;

  /// Another process's device memory, mapped into this one while this lives (cuIpcOpenMemHandle).
  /// Holds the primary context of its device as long.
  class IpcMapping {
   public:
    ~IpcMapping();
    IpcMapping(const IpcMapping&) = delete;
    IpcMapping& operator=(const IpcMapping&) = delete;
    std::byte* base() const { return base_; }

   private:
    friend class CudaDriver;
    IpcMapping(int ordinal, std::byte* base) : ordinal_(ordinal), base_(base) {}
    int ordinal_;
    std::byte* base_;
  };
  /// Maps the allocation behind `handle` (made by another process on the same GPU) into GPU `ordinal`'s
  /// primary context. Throws ortfleet::Error when the driver refuses.
  std::unique_ptr<IpcMapping> open_ipc(int ordinal, const std::array<std::byte, 64>& handle) const;

  /// Host memory pinned for DMA while this lives (cuMemHostRegister, portable to every context): the
  /// GPU's copies from it run asynchronously instead of through a staging buffer. Holds the primary
  /// context of its device as long.
  class HostRegistration {
   public:
    ~HostRegistration();
    HostRegistration(const HostRegistration&) = delete;
    HostRegistration& operator=(const HostRegistration&) = delete;

   private:
    friend class CudaDriver;
    HostRegistration(int ordinal, void* pointer) : ordinal_(ordinal), pointer_(pointer) {}
    int ordinal_;
    void* pointer_;
  };
  /// Pins `bytes` at `pointer` (page-aligned, e.g. a shared-memory mapping) for `ordinal`'s copies.
  /// Throws ortfleet::Error when the driver refuses (locked-memory limit, memory already registered).
  std::unique_ptr<HostRegistration> register_host(int ordinal, void* pointer, size_t bytes) const;

  /// Restores the calling thread's current CUDA context when it goes away. The caller's thread may
  /// be a PyTorch or CuPy one whose current device is theirs: ONNX Runtime's runs (cudaSetDevice) and
  /// this class's helpers switch it, and must leave it as they found it.
  class CurrentContextKeeper {
   public:
    CurrentContextKeeper();
    ~CurrentContextKeeper();
    CurrentContextKeeper(const CurrentContextKeeper&) = delete;
    CurrentContextKeeper& operator=(const CurrentContextKeeper&) = delete;

   private:
    CUcontext previous_ = nullptr;
    bool saved_ = false;
  };

  // Attribute numbers of CUdevice_attribute.
  static constexpr int kMultiprocessorCount = 16;
  static constexpr int kPciBusId = 33;
  static constexpr int kPciDeviceId = 34;
  static constexpr int kPciDomainId = 50;
  static constexpr int kComputeCapabilityMajor = 75;
  static constexpr int kComputeCapabilityMinor = 76;

 private:
  CudaDriver();
  void check(CUresult r, const char* call, int ordinal) const;
  /// Retains the primary context of `ordinal` and makes it current on the calling thread; each call is
  /// paired with a release (outside this class: through a PrimaryContext).
  CUcontext retain_primary_context(int ordinal) const;
  void release_primary_context(int ordinal) const;
  /// Runs `end` (the call that ends a registration or mapping) in the primary context of `ordinal`,
  /// then lets go of the context retain the registration or mapping held.
  void end_retained(int ordinal, const std::function<void()>& end) const;

  bool ok_ = false;
  std::string error_;
  std::string path_;
  void* library_ = nullptr;  // libcuda.so.1, never closed
  double init_ms_ = 0;

  CUresult (*cuInit_)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion_)(int*) = nullptr;
  CUresult (*cuDeviceGetCount_)(int*) = nullptr;
  CUresult (*cuDeviceGet_)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName_)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid_)(unsigned char*, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem_)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute_)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain_)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent_)(CUcontext) = nullptr;
  CUresult (*cuCtxGetCurrent_)(CUcontext*) = nullptr;
  CUresult (*cuMemGetInfo_)(size_t*, size_t*) = nullptr;
  CUresult (*cuGetErrorString_)(CUresult, const char**) = nullptr;
  CUresult (*cuMemcpyDtoH_)(void*, uintptr_t, size_t) = nullptr;
  CUresult (*cuCtxSynchronize_)() = nullptr;
  CUresult (*cuMemAlloc_)(uintptr_t*, size_t) = nullptr;
  CUresult (*cuMemFree_)(uintptr_t) = nullptr;
  CUresult (*cuMemcpyHtoD_)(uintptr_t, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoD_)(uintptr_t, uintptr_t, size_t) = nullptr;
  // CUDA_MEMCPY2D's layout (cuda.h, unchanged since CUDA 3.2).
  struct Memcpy2D {
    size_t src_x_bytes, src_y;
    int src_memory_type;
    const void* src_host;
    uintptr_t src_device;
    void* src_array;
    size_t src_pitch;
    size_t dst_x_bytes, dst_y;
    int dst_memory_type;
    void* dst_host;
    uintptr_t dst_device;
    void* dst_array;
    size_t dst_pitch;
    size_t width_bytes, height;
  };
  CUresult (*cuMemcpy2D_)(const Memcpy2D*) = nullptr;
  CUresult (*cuMemsetD8_)(uintptr_t, unsigned char, size_t) = nullptr;
  CUresult (*cuMemsetD16_)(uintptr_t, unsigned short, size_t) = nullptr;
  CUresult (*cuMemsetD32_)(uintptr_t, unsigned int, size_t) = nullptr;
  CUresult (*cuMemsetD2D32_)(uintptr_t, size_t, unsigned int, size_t, size_t) = nullptr;
  CUresult (*cuMemAllocHost_)(void**, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync_)(uintptr_t, const void*, size_t, void*) = nullptr;
  CUresult (*cuMemFreeHost_)(void*) = nullptr;
  CUresult (*cuMemHostRegister_)(void*, size_t, unsigned) = nullptr;
  CUresult (*cuMemHostUnregister_)(void*) = nullptr;
  struct IpcMemHandle {
    std::array<std::byte, 64> reserved;
  };
  CUresult (*cuIpcGetMemHandle_)(IpcMemHandle*, uintptr_t) = nullptr;
  CUresult (*cuIpcOpenMemHandle_)(uintptr_t*, IpcMemHandle, unsigned) = nullptr;
  CUresult (*cuIpcCloseMemHandle_)(uintptr_t) = nullptr;
  CUresult (*cuMemGetAddressRange_)(uintptr_t*, size_t*, uintptr_t) = nullptr;
  mutable std::mutex mutex_;
  mutable std::map<int, int> retained_;  // ordinal -> retain count
};

}  // namespace ortfleet::detail
