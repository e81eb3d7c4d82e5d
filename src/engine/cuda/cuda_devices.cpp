#include "ortfleet/engine/cuda_devices.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "engine/cuda/cuda_driver.hpp"
#include "engine/cuda/nvml.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {

namespace {

/// NVML tells what the driver API does not: the driver's release, MIG mode and persistence mode.
void add_nvml_facts(CudaDriverInfo& info) {
  const auto& nvml = detail::Nvml::instance();
  if (!nvml.ok()) return;
  if (auto version = nvml.driver_version()) info.driver_version = *version;
  for (auto& gpu : info.gpus) {
    const auto modes = nvml.modes(gpu.pci_bus_id);
    if (modes.mig_enabled) gpu.mig_enabled = modes.mig_enabled;
    if (modes.persistence_mode) gpu.persistence_mode = modes.persistence_mode;
  }
}

/// CUDA_VISIBLE_DEVICES's entries, spaces and tabs around each cut off.
std::vector<std::string> visible_entries(const char* visible) {
  std::vector<std::string> entries;
  std::stringstream list(visible);
  for (std::string entry; std::getline(list, entry, ',');) {
    const auto first = entry.find_first_not_of(" \t");
    const auto last = entry.find_last_not_of(" \t");
    entries.push_back(first == std::string::npos ? std::string() : entry.substr(first, last - first + 1));
  }
  return entries;
}

}  // namespace

const CudaDriverInfo& probe_cuda_driver() {
  static const CudaDriverInfo info = [] {
    CudaDriverInfo out;
    auto& driver = detail::CudaDriver::instance();
    out.library_path = driver.library_path();
    out.init_ms = driver.init_ms();
    if (!driver.ok()) {
      out.error = driver.error();
      return out;
    }
    out.loaded = true;
    try {
      out.driver_api_version = driver.driver_version();
      for (int i = 0; i < driver.device_count(); ++i) {
        GpuInfo gpu;
        gpu.ordinal = i;
        gpu.name = driver.device_name(i);
        gpu.uuid = driver.device_uuid(i);
        gpu.pci_bus_id = driver.pci_bus_id(i);
        gpu.total_memory = driver.total_memory(i);
        gpu.compute_major = driver.attribute(i, detail::CudaDriver::kComputeCapabilityMajor);
        gpu.compute_minor = driver.attribute(i, detail::CudaDriver::kComputeCapabilityMinor);
        gpu.multiprocessors = driver.attribute(i, detail::CudaDriver::kMultiprocessorCount);
        out.gpus.push_back(std::move(gpu));
      }
    } catch (const Error& e) {
      out.error = e.what();
    }
    add_nvml_facts(out);
    return out;
  }();
  return info;
}

std::optional<std::string> narrowed_visible_devices(const Device& device) {
  if (!device.is_cuda() || device.index < 0) return std::nullopt;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return std::to_string(device.index);
  const std::vector<std::string> entries = visible_entries(visible);
  if (static_cast<size_t>(device.index) >= entries.size() || entries[static_cast<size_t>(device.index)].empty()) return std::nullopt;
  return entries[static_cast<size_t>(device.index)];
}

namespace {
std::atomic<int> narrowed_index{-1};
}  // namespace

void set_narrowed_device(const Device& device) { narrowed_index = device.is_cuda() ? device.index : -1; }

int cuda_ordinal(const Device& device) { return device.is_cuda() && device.index == narrowed_index.load() ? 0 : device.index; }

int gpu_count() {
  int nodes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 && name.find_first_not_of("0123456789", 6) == std::string::npos) ++nodes;
  }
  if (nodes == 0) return 0;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    // CUDA stops at the first invalid entry; "" and "-1" hide every GPU.
    int listed = 0;
    for (const auto& item : visible_entries(visible)) {
      if (item.empty() || item.front() == '-') break;
      ++listed;
    }
    return std::min(nodes, listed);
  }
  return nodes;
}

}  // namespace ortfleet
