#include "engine/cuda/cuda_driver.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/parallel_copy.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

CudaDriver& CudaDriver::instance() {
  static CudaDriver driver;  // constructed once, thread-safely; never unloaded
  return driver;
}

CudaDriver::CudaDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* reason = dlerror();
    error_ = std::string("libcuda.so.1 (the NVIDIA driver) is not loadable: ") + (reason ? reason : "not found");
    return;
  }
  library_ = lib;
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) path_ = map->l_name;

  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr && error_.empty()) error_ = std::string("libcuda.so.1 lacks ") + name + " (driver too old?)";
  };
  bind(cuInit_, "cuInit");
  bind(cuDriverGetVersion_, "cuDriverGetVersion");
  bind(cuDeviceGetCount_, "cuDeviceGetCount");
  bind(cuDeviceGet_, "cuDeviceGet");
  bind(cuDeviceGetName_, "cuDeviceGetName");
  bind(cuDeviceGetUuid_, "cuDeviceGetUuid_v2");
  bind(cuDeviceTotalMem_, "cuDeviceTotalMem_v2");
  bind(cuDeviceGetAttribute_, "cuDeviceGetAttribute");
  bind(cuDevicePrimaryCtxRetain_, "cuDevicePrimaryCtxRetain");
  bind(cuDevicePrimaryCtxRelease_, "cuDevicePrimaryCtxRelease_v2");
  bind(cuCtxSetCurrent_, "cuCtxSetCurrent");
  bind(cuCtxGetCurrent_, "cuCtxGetCurrent");
  bind(cuMemGetInfo_, "cuMemGetInfo_v2");
  bind(cuGetErrorString_, "cuGetErrorString");
  bind(cuMemcpyDtoH_, "cuMemcpyDtoH_v2");
  bind(cuCtxSynchronize_, "cuCtxSynchronize");
  bind(cuMemAlloc_, "cuMemAlloc_v2");
  bind(cuMemFree_, "cuMemFree_v2");
  bind(cuMemcpyHtoD_, "cuMemcpyHtoD_v2");
  bind(cuMemcpyDtoD_, "cuMemcpyDtoD_v2");
  bind(cuMemcpy2D_, "cuMemcpy2D_v2");
  bind(cuMemsetD8_, "cuMemsetD8_v2");
  bind(cuMemsetD16_, "cuMemsetD16_v2");
  bind(cuMemsetD32_, "cuMemsetD32_v2");
  bind(cuMemsetD2D32_, "cuMemsetD2D32_v2");
  bind(cuMemAllocHost_, "cuMemAllocHost_v2");
  bind(cuMemFreeHost_, "cuMemFreeHost");
  bind(cuMemcpyHtoDAsync_, "cuMemcpyHtoDAsync_v2");
  bind(cuMemHostRegister_, "cuMemHostRegister_v2");
  bind(cuMemHostUnregister_, "cuMemHostUnregister");
  bind(cuIpcGetMemHandle_, "cuIpcGetMemHandle");
  bind(cuIpcOpenMemHandle_, "cuIpcOpenMemHandle_v2");
  bind(cuIpcCloseMemHandle_, "cuIpcCloseMemHandle");
  bind(cuMemGetAddressRange_, "cuMemGetAddressRange_v2");
  if (!error_.empty()) return;

  const auto start = std::chrono::steady_clock::now();
  const CUresult r = cuInit_(0);
  init_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (r != 0) {
    error_ = "cuInit failed: " + describe(r) +
             (r == 100 ? " (no CUDA-capable GPU is visible; check CUDA_VISIBLE_DEVICES)" : "");
    return;
  }
  ok_ = true;
}

std::string CudaDriver::describe(CUresult r) const {
  const char* text = nullptr;
  if (cuGetErrorString_ != nullptr && cuGetErrorString_(r, &text) == 0 && text != nullptr) {
    return std::string(text) + " (CUDA error " + std::to_string(r) + ")";
  }
  return "CUDA error " + std::to_string(r);
}

void* CudaDriver::optional_entry_point(const char* name) const { return library_ == nullptr ? nullptr : dlsym(library_, name); }

void CudaDriver::check(CUresult r, const char* call, int ordinal) const {
  if (r == 0) return;
  std::string hint = "Run 'ortfleet doctor' to see the GPUs and the driver state";
  if (r == 2) hint = "The GPU is out of memory: free memory on it or use another GPU";
  if (r == 101) hint = "That GPU does not exist; 'ortfleet doctor' lists the GPUs (CUDA_VISIBLE_DEVICES may hide some)";
  throw Error(std::string(call) + " failed: " + describe(r), hint, ordinal >= 0 ? "cuda:" + std::to_string(ordinal) : "");
}

int CudaDriver::device_count() const {
  if (!ok_) return 0;
  int n = 0;
  return cuDeviceGetCount_(&n) == 0 ? n : 0;
}

int CudaDriver::driver_version() const {
  int v = 0;
  if (ok_) check(cuDriverGetVersion_(&v), "cuDriverGetVersion", -1);
  return v;
}

std::string CudaDriver::device_name(int ordinal) const {
  CUdevice dev = 0;
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", ordinal);
  char name[256] = {};
  check(cuDeviceGetName_(name, sizeof(name), dev), "cuDeviceGetName", ordinal);
  return name;
}

std::string CudaDriver::device_uuid(int ordinal) const {
  CUdevice dev = 0;
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", ordinal);
  unsigned char b[16] = {};
  check(cuDeviceGetUuid_(b, dev), "cuDeviceGetUuid", ordinal);
  char text[64];
  std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

int CudaDriver::attribute(int ordinal, int attr) const {
  CUdevice dev = 0;
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", ordinal);
  int value = 0;
  check(cuDeviceGetAttribute_(&value, attr, dev), "cuDeviceGetAttribute", ordinal);
  return value;
}

std::string CudaDriver::pci_bus_id(int ordinal) const {
  char text[32];
  std::snprintf(text, sizeof(text), "%08x:%02x:%02x.0", attribute(ordinal, kPciDomainId), attribute(ordinal, kPciBusId),
                attribute(ordinal, kPciDeviceId));
  return text;
}

uint64_t CudaDriver::total_memory(int ordinal) const {
  CUdevice dev = 0;
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", ordinal);
  size_t bytes = 0;
  check(cuDeviceTotalMem_(&bytes, dev), "cuDeviceTotalMem", ordinal);
  return bytes;
}

CudaDriver::CUcontext CudaDriver::retain_primary_context(int ordinal) const {
  if (!ok_) throw Error("no CUDA driver: " + error_, "Run 'ortfleet doctor'", "cuda:" + std::to_string(ordinal));
  CUdevice dev = 0;
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", ordinal);
  CUcontext ctx = nullptr;
  check(cuDevicePrimaryCtxRetain_(&ctx, dev), "cuDevicePrimaryCtxRetain", ordinal);
  check(cuCtxSetCurrent_(ctx), "cuCtxSetCurrent", ordinal);
  std::lock_guard lock(mutex_);
  ++retained_[ordinal];
  return ctx;
}

void CudaDriver::release_primary_context(int ordinal) const {
  CUdevice dev = 0;
  if (!ok_ || cuDeviceGet_(&dev, ordinal) != 0) return;
  cuDevicePrimaryCtxRelease_(dev);
  std::lock_guard lock(mutex_);
  if (--retained_[ordinal] <= 0) retained_.erase(ordinal);
}

CudaDriver::PrimaryContext::PrimaryContext(int ordinal) : context_(CudaDriver::instance().retain_primary_context(ordinal)) {
  ordinal_ = ordinal;  // once retained: a retain that threw holds nothing
}

CudaDriver::PrimaryContext::~PrimaryContext() { reset(); }

CudaDriver::PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept : ordinal_(other.ordinal_), context_(other.context_) {
  other.ordinal_ = -1;
}

CudaDriver::PrimaryContext& CudaDriver::PrimaryContext::operator=(PrimaryContext&& other) noexcept {
  if (this != &other) {
    reset();
    ordinal_ = std::exchange(other.ordinal_, -1);
    context_ = other.context_;
  }
  return *this;
}

void CudaDriver::PrimaryContext::reset() {
  if (ordinal_ >= 0) CudaDriver::instance().release_primary_context(ordinal_);
  ordinal_ = -1;
}

bool CudaDriver::holds_context(int ordinal) const {
  std::lock_guard lock(mutex_);
  return retained_.count(ordinal) > 0;
}

void CudaDriver::synchronize(int ordinal) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const CUresult r = cuCtxSynchronize_();
  check(r, "cuCtxSynchronize", ordinal);
}

void* CudaDriver::allocate(int ordinal, size_t bytes) const {
  const CurrentContextKeeper keep;
  retain_primary_context(ordinal);  // held until release(): the memory lives in this context
  uintptr_t p = 0;
  const CUresult r = cuMemAlloc_(&p, std::max<size_t>(bytes, 1));
  if (r != 0) release_primary_context(ordinal);
  check(r, "cuMemAlloc", ordinal);
  return reinterpret_cast<void*>(p);
}

void CudaDriver::release(int ordinal, void* pointer) const {
  if (pointer == nullptr) return;
  const CurrentContextKeeper keep;
  retain_primary_context(ordinal);
  cuMemFree_(reinterpret_cast<uintptr_t>(pointer));
  release_primary_context(ordinal);
  release_primary_context(ordinal);  // the retain of allocate()
}

void CudaDriver::copy_to_device(int ordinal, void* dst, const void* src, size_t bytes) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const CUresult r = cuMemcpyHtoD_(reinterpret_cast<uintptr_t>(dst), src, bytes);
  check(r, "cuMemcpyHtoD", ordinal);
}

void CudaDriver::copy_to_host(int ordinal, void* dst, const void* src, size_t bytes) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const CUresult r = cuMemcpyDtoH_(dst, reinterpret_cast<uintptr_t>(src), bytes);
  check(r, "cuMemcpyDtoH", ordinal);
}

void CudaDriver::copy_on_device(int ordinal, void* dst, const void* src, size_t bytes) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  CUresult r = cuMemcpyDtoD_(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), bytes);
  // A device-to-device copy returns before it is done; the caller reads or overwrites right after.
  if (r == 0) r = cuCtxSynchronize_();
  check(r, "cuMemcpyDtoD", ordinal);
}

void CudaDriver::copy_rows(int ordinal, void* dst, bool dst_on_device, size_t dst_pitch, const void* src, bool src_on_device,
                           size_t src_pitch, size_t width, size_t height) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  constexpr int kHostMemory = 1;    // CU_MEMORYTYPE_HOST
  constexpr int kDeviceMemory = 2;  // CU_MEMORYTYPE_DEVICE
  Memcpy2D copy{};
  copy.src_memory_type = src_on_device ? kDeviceMemory : kHostMemory;
  if (src_on_device) copy.src_device = reinterpret_cast<uintptr_t>(src);
  else copy.src_host = src;
  copy.src_pitch = src_pitch;
  copy.dst_memory_type = dst_on_device ? kDeviceMemory : kHostMemory;
  if (dst_on_device) copy.dst_device = reinterpret_cast<uintptr_t>(dst);
  else copy.dst_host = dst;
  copy.dst_pitch = dst_pitch;
  copy.width_bytes = width;
  copy.height = height;
  CUresult r = cuMemcpy2D_(&copy);
  if (r == 0) r = cuCtxSynchronize_();
  check(r, "cuMemcpy2D", ordinal);
}

void CudaDriver::fill(int ordinal, void* dst, size_t count, const void* pattern, size_t pattern_size) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const auto at = reinterpret_cast<uintptr_t>(dst);
  CUresult r = 0;
  if (pattern_size == 1) {
    r = cuMemsetD8_(at, *static_cast<const unsigned char*>(pattern), count);
  } else if (pattern_size == 2) {
    unsigned short v = 0;
    std::memcpy(&v, pattern, 2);
    r = cuMemsetD16_(at, v, count);
  } else if (pattern_size == 4) {
    unsigned int v = 0;
    std::memcpy(&v, pattern, 4);
    r = cuMemsetD32_(at, v, count);
  } else if (pattern_size == 8) {
    // No 64-bit memset: each half of every element, as a column of 32-bit words 8 bytes apart.
    std::array<unsigned int, 2> halves{};
    std::memcpy(halves.data(), pattern, 8);
    r = cuMemsetD2D32_(at, 8, halves[0], 1, count);
    if (r == 0) r = cuMemsetD2D32_(at + 4, 8, halves[1], 1, count);
  } else {
    throw Error("cannot fill device memory with " + std::to_string(pattern_size) + "-byte elements");
  }
  if (r == 0) r = cuCtxSynchronize_();
  check(r, "cuMemset", ordinal);
}

CudaDriver::StagedUploadTimes CudaDriver::upload_staged(int ordinal, void* dst, uint64_t bytes,
                                                        const std::function<void(std::byte*, uint64_t, uint64_t)>& fill) const {
  StagedUploadTimes times;
  if (bytes == 0) return times;
  // Pinning host memory costs about 0.7 ms per MB (an H100 host: 2 x 32 MiB took 43-48 ms), more
  // than filling and copying it, so the staging buffers are small: an eighth of the upload each,
  // between 2 and 8 MiB, each chunk filled by up to 8 threads in pieces of 512 KiB and up.
  constexpr uint64_t kMinChunk = uint64_t{2} << 20;
  constexpr uint64_t kMaxChunk = uint64_t{8} << 20;
  constexpr size_t kMinFillPerThread = size_t{512} << 10;
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const size_t chunk = static_cast<size_t>(std::min(bytes, std::clamp((bytes + 7) / 8, kMinChunk, kMaxChunk)));
  std::array<void*, 2> staging{nullptr, nullptr};
  CUresult r = 0;
  auto t = std::chrono::steady_clock::now();
  for (auto& buffer : staging) {
    if (r == 0) r = cuMemAllocHost_(&buffer, chunk);
  }
  times.staging_ms += since(t);
  // Two buffers: one is filled from the host while the other's copy is in flight. Synchronising
  // before each copy keeps one copy in flight, so the buffer about to be filled is free.
  const auto base = reinterpret_cast<uintptr_t>(dst);
  size_t next = 0;
  for (uint64_t offset = 0; r == 0 && offset < bytes; offset += chunk, next ^= 1) {
    const uint64_t length = std::min<uint64_t>(chunk, bytes - offset);
    auto* buffer = static_cast<std::byte*>(staging[next]);
    t = std::chrono::steady_clock::now();
    split_across_threads(
        length, [&](size_t from, size_t part) { fill(buffer + from, offset + from, part); }, kMinFillPerThread);
    times.fill_ms += since(t);
    t = std::chrono::steady_clock::now();
    r = cuCtxSynchronize_();
    times.wait_ms += since(t);
    if (r == 0) r = cuMemcpyHtoDAsync_(base + offset, buffer, length, nullptr);
  }
  t = std::chrono::steady_clock::now();
  const CUresult done = cuCtxSynchronize_();
  times.wait_ms += since(t);
  if (r == 0) r = done;
  t = std::chrono::steady_clock::now();
  for (auto* buffer : staging) {
    if (buffer != nullptr) cuMemFreeHost_(buffer);
  }
  times.staging_ms += since(t);
  check(r, "cuMemcpyHtoDAsync (staged upload)", ordinal);
  return times;
}

double CudaDriver::pinned_upload_gb_per_s(int ordinal, size_t bytes, int repeats) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  void* host = nullptr;
  CUresult r = cuMemAllocHost_(&host, bytes);
  check(r, "cuMemAllocHost", ordinal);
  std::fill_n(static_cast<char*>(host), bytes, char{1});  // pages in place before the clock starts
  uintptr_t device = 0;
  r = cuMemAlloc_(&device, bytes);
  double best_s = 0;
  for (int i = 0; r == 0 && i < std::max(repeats, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    r = cuMemcpyHtoD_(device, host, bytes);
    if (r == 0) r = cuCtxSynchronize_();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == 0 && (best_s == 0 || s < best_s)) best_s = s;
  }
  if (device != 0) cuMemFree_(device);
  cuMemFreeHost_(host);
  check(r, "cuMemcpyHtoD (pinned)", ordinal);
  return best_s > 0 ? static_cast<double>(bytes) / 1e9 / best_s : 0;
}

std::pair<uint64_t, uint64_t> CudaDriver::memory_info(int ordinal) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  const CUresult r = cuMemGetInfo_(&free_bytes, &total_bytes);
  check(r, "cuMemGetInfo", ordinal);
  return {free_bytes, total_bytes};
}

size_t CudaDriver::set_stack_size(int ordinal, size_t bytes) const {
  constexpr int kStackSize = 0;  // CU_LIMIT_STACK_SIZE
  using SetLimit = CUresult (*)(int, size_t);
  using GetLimit = CUresult (*)(size_t*, int);
  const auto set = reinterpret_cast<SetLimit>(optional_entry_point("cuCtxSetLimit"));
  const auto get = reinterpret_cast<GetLimit>(optional_entry_point("cuCtxGetLimit"));
  if (set == nullptr || get == nullptr) throw Error("the NVIDIA driver has no cuCtxSetLimit", "", "cuda:" + std::to_string(ordinal));
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  check(set(kStackSize, bytes), "cuCtxSetLimit", ordinal);
  size_t now = 0;
  check(get(&now, kStackSize), "cuCtxGetLimit", ordinal);
  return now;
}

std::unique_ptr<CudaDriver::HostRegistration> CudaDriver::register_host(int ordinal, void* pointer, size_t bytes) const {
  constexpr unsigned kPortable = 0x01;  // CU_MEMHOSTREGISTER_PORTABLE: pinned for every context
  const CurrentContextKeeper keep;
  retain_primary_context(ordinal);  // held until the registration ends
  const CUresult r = cuMemHostRegister_(pointer, bytes, kPortable);
  if (r != 0) release_primary_context(ordinal);
  check(r, "cuMemHostRegister", ordinal);
  return std::unique_ptr<HostRegistration>(new HostRegistration(ordinal, pointer));
}

void CudaDriver::end_retained(int ordinal, const std::function<void()>& end) const {
  const CurrentContextKeeper keep;
  try {
    retain_primary_context(ordinal);
  } catch (const Error&) {
    return;  // the driver is gone, and with it what `end` would end
  }
  end();
  release_primary_context(ordinal);
  release_primary_context(ordinal);  // the retain of what is ended
}

CudaDriver::HostRegistration::~HostRegistration() {
  const auto& driver = CudaDriver::instance();
  driver.end_retained(ordinal_, [&] { driver.cuMemHostUnregister_(pointer_); });
}

CudaDriver::IpcHandle CudaDriver::ipc_handle(int ordinal, const void* pointer) const {
  const CurrentContextKeeper keep;
  const PrimaryContext context(ordinal);
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uintptr_t base = 0;
  size_t size = 0;
  IpcMemHandle handle{};
  CUresult r = cuMemGetAddressRange_(&base, &size, address);
  if (r == 0) r = cuIpcGetMemHandle_(&handle, base);
  check(r, "cuIpcGetMemHandle", ordinal);
  return {handle.reserved, address - base};
}

std::unique_ptr<CudaDriver::IpcMapping> CudaDriver::open_ipc(int ordinal, const std::array<std::byte, 64>& handle) const {
  constexpr unsigned kLazyEnablePeerAccess = 0x1;  // the only flag the driver takes
  const CurrentContextKeeper keep;
  retain_primary_context(ordinal);  // held until the mapping closes
  uintptr_t base = 0;
  const CUresult r = cuIpcOpenMemHandle_(&base, IpcMemHandle{handle}, kLazyEnablePeerAccess);
  if (r != 0) release_primary_context(ordinal);
  check(r, "cuIpcOpenMemHandle", ordinal);
  return std::unique_ptr<IpcMapping>(new IpcMapping(ordinal, reinterpret_cast<std::byte*>(base)));
}

CudaDriver::IpcMapping::~IpcMapping() {
  const auto& driver = CudaDriver::instance();
  driver.end_retained(ordinal_, [&] { driver.cuIpcCloseMemHandle_(reinterpret_cast<uintptr_t>(base_)); });
}

CudaDriver::CurrentContextKeeper::CurrentContextKeeper() {
  const auto& driver = CudaDriver::instance();
  saved_ = driver.ok_ && driver.cuCtxGetCurrent_(&previous_) == 0;
}

CudaDriver::CurrentContextKeeper::~CurrentContextKeeper() {
  if (saved_) CudaDriver::instance().cuCtxSetCurrent_(previous_);
}

}  // namespace ortfleet::detail
