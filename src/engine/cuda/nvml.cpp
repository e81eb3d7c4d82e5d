#include "engine/cuda/nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <vector>

namespace ortfleet::detail {

namespace {
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlNotSupported = 3;
constexpr int kNvmlInsufficientSize = 7;

// nvml.h's nvmlProcessInfo_t (the _v2/_v3 calls' record).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): NVML's own type
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr unsigned long long kNvmlNotAvailable = ~0ULL;  // NOLINT(google-runtime-int): NVML_VALUE_NOT_AVAILABLE

template <typename Fn>
Fn nvml_entry(void* library, const char* name) {
  return library == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(library, name));
}
}  // namespace

const Nvml& Nvml::instance() {
  static const Nvml nvml;
  return nvml;
}

Nvml::Nvml() {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  const auto init = nvml_entry<int (*)()>(library_, "nvmlInit_v2");
  ok_ = init != nullptr && init() == kNvmlSuccess;
}

std::optional<std::string> Nvml::driver_version() const {
  const auto version = nvml_entry<int (*)(char*, unsigned)>(library_, "nvmlSystemGetDriverVersion");
  std::array<char, 96> text{};
  if (!ok_ || version == nullptr || version(text.data(), text.size()) != kNvmlSuccess) return std::nullopt;
  return std::string(text.data());
}

Nvml::GpuModes Nvml::modes(const std::string& pci_bus_id) const {
  GpuModes out;
  const auto by_pci = nvml_entry<int (*)(const char*, void**)>(library_, "nvmlDeviceGetHandleByPciBusId_v2");
  void* handle = nullptr;
  if (!ok_ || by_pci == nullptr || by_pci(pci_bus_id.c_str(), &handle) != kNvmlSuccess) return out;
  if (const auto mig = nvml_entry<int (*)(void*, unsigned*, unsigned*)>(library_, "nvmlDeviceGetMigMode")) {
    unsigned current = 0;
    unsigned pending = 0;
    const int r = mig(handle, &current, &pending);
    if (r == kNvmlSuccess) out.mig_enabled = current != 0;
    else if (r == kNvmlNotSupported) out.mig_enabled = false;  // a GPU without MIG
  }
  if (const auto persistence = nvml_entry<int (*)(void*, unsigned*)>(library_, "nvmlDeviceGetPersistenceMode")) {
    unsigned enabled = 0;
    if (persistence(handle, &enabled) == kNvmlSuccess) out.persistence_mode = enabled != 0;
  }
  return out;
}

std::map<int, uint64_t> Nvml::memory_by_process() const {
  std::map<int, uint64_t> out;
  const auto count = nvml_entry<int (*)(unsigned*)>(library_, "nvmlDeviceGetCount_v2");
  const auto by_index = nvml_entry<int (*)(unsigned, void**)>(library_, "nvmlDeviceGetHandleByIndex_v2");
  // _v2 first: its record is always the 24 bytes above. The R535 drivers' _v3 wrote 32-byte records
  // (a usedGpuCcProtectedMemory field, later taken back) into a caller's array of 24-byte ones, past
  // its end once 49 processes ran on a GPU; _v3 is asked only where _v2 is gone, and every array is
  // sized for the longer record, so that no driver writes past it.
  auto processes = nvml_entry<int (*)(void*, unsigned*, NvmlProcessInfo*)>(library_, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (processes == nullptr) processes = nvml_entry<int (*)(void*, unsigned*, NvmlProcessInfo*)>(library_, "nvmlDeviceGetComputeRunningProcesses_v3");
  unsigned gpus = 0;
  if (!ok_ || count == nullptr || by_index == nullptr || processes == nullptr || count(&gpus) != kNvmlSuccess) return out;
  for (unsigned g = 0; g < gpus; ++g) {
    void* handle = nullptr;
    if (by_index(g, &handle) != kNvmlSuccess) continue;
    // Room for N records of up to 32 bytes, told as N records: no driver writes past it.
    constexpr size_t kLongestRecord = 32;
    const auto records_for = [](unsigned records) {
      return (static_cast<size_t>(records) * kLongestRecord + sizeof(NvmlProcessInfo) - 1) / sizeof(NvmlProcessInfo);
    };
    unsigned asked = 64;
    std::vector<NvmlProcessInfo> infos(records_for(asked));
    unsigned n = asked;
    int r = processes(handle, &n, infos.data());
    if (r == kNvmlInsufficientSize && n < (1u << 20)) {  // n now says how many there are
      asked = n + 16;
      infos.assign(records_for(asked), NvmlProcessInfo{});
      n = asked;
      r = processes(handle, &n, infos.data());
    }
    n = std::min(n, asked);
    if (r != kNvmlSuccess) continue;
    for (unsigned i = 0; i < n && i < infos.size(); ++i) {
      if (infos[i].used_gpu_memory != kNvmlNotAvailable) out[static_cast<int>(infos[i].pid)] += infos[i].used_gpu_memory;
    }
  }
  return out;
}

}  // namespace ortfleet::detail
