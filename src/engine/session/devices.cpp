#include "ortfleet/engine/devices.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/slurm.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "engine/cuda/nvml.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {

std::string Device::to_string() const {
  if (kind == Kind::cuda) return "cuda:" + std::to_string(index);
  return index == 0 ? "cpu" : "cpu:" + std::to_string(index);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int> to_int(std::string_view s) {
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

std::string gpus_present(int gpu_count) {
  if (gpu_count == 0) return "this machine has no usable GPU; use --devices cpu";
  if (gpu_count == 1) return "this machine has 1 GPU: cuda:0";
  return "this machine has " + std::to_string(gpu_count) + " GPUs: cuda:0 to cuda:" + std::to_string(gpu_count - 1);
}

[[noreturn]] void bad_item(std::string_view item, const std::string& why) {
  throw Error("unknown device '" + std::string(item) + "'" + (why.empty() ? "" : ": " + why),
              "Write devices as all, cpu, cpu*N, 0,1,2, 0-3 or cuda:0,cuda:1");
}

}  // namespace

Device Device::parse(std::string_view text) {
  text = trim(text);
  if (text == "cpu") return Device::cpu();
  if (text.rfind("cpu:", 0) == 0) {
    if (auto n = to_int(text.substr(4))) return Device::cpu(*n);
  } else if (text.rfind("cuda:", 0) == 0) {
    if (auto n = to_int(text.substr(5))) return Device::cuda(*n);
  }
  bad_item(text, "");
}

std::string to_string(const std::vector<Device>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : ",") + d.to_string();
  return out;
}

std::vector<Device> parse_devices(std::string_view spec, int gpu_count) {
  spec = trim(spec);
  if (spec.empty() || spec == "all") {
    if (gpu_count == 0) return {Device::cpu()};
    std::vector<Device> all;
    for (int i = 0; i < gpu_count; ++i) all.push_back(Device::cuda(i));
    return all;
  }
  std::vector<Device> devices;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    std::string_view item = trim(spec.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) bad_item(item, "empty entry");
    if (item.rfind("cpu", 0) == 0) {
      std::string_view rest = item.substr(3);
      if (rest.empty()) {
        devices.push_back(Device::cpu());
      } else if (rest.front() == '*') {
        auto n = to_int(rest.substr(1));
        if (!n || *n < 1 || *n > 256) bad_item(item, "cpu*N takes N from 1 to 256");
        for (int i = 0; i < *n; ++i) devices.push_back(Device::cpu(i));
      } else if (rest.front() == ':') {
        auto n = to_int(rest.substr(1));
        if (!n) bad_item(item, "");
        devices.push_back(Device::cpu(*n));
      } else {
        bad_item(item, "");
      }
      continue;
    }
    if (item.rfind("cuda:", 0) == 0) item.remove_prefix(5);
    else if (item.rfind("gpu:", 0) == 0) item.remove_prefix(4);
    const size_t dash = item.find('-');
    auto first = to_int(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : to_int(item.substr(dash + 1));
    if (!first || !last || *last < *first) bad_item(item, "");
    for (int i = *first; i <= *last; ++i) {
      if (i >= gpu_count) {
        throw Error("no GPU cuda:" + std::to_string(i) + " (" + gpus_present(gpu_count) + ")",
                    "Pick devices from 'ortfleet doctor'");
      }
      devices.push_back(Device::cuda(i));
    }
  }
  std::set<Device> seen;
  for (const auto& d : devices) {
    if (!seen.insert(d).second) throw Error("device " + d.to_string() + " is listed twice", "List each device once");
  }
  return devices;
}

void check_cpu_devices_fit(const std::vector<Device>& devices) {
  const auto cpus = static_cast<int>(std::count_if(devices.begin(), devices.end(), [](const Device& d) { return !d.is_gpu(); }));
  const int usable = detail::usable_cpus();
  if (cpus <= usable) return;
  throw Error(fmt::format("{} CPU sessions asked for, and this process may use {} CPU{}: at most {}, one per core", cpus, usable,
                          usable == 1 ? "" : "s", usable),
              fmt::format("Ask for cpu*{} or fewer: more sessions than cores only take turns on them, each in a process of its own", usable));
}

DeviceSelection select_devices(std::string_view spec) {
  const std::string_view text = trim(spec);
  const auto slurm = detail::slurm_allocation();
  if (!slurm || !(text.empty() || text == "all")) {
    DeviceSelection chosen{parse_devices(spec, gpu_count()), ""};
    check_cpu_devices_fit(chosen.devices);
    return chosen;
  }
  const std::string job = slurm->described();
  const std::string cpus = slurm->cpus_on_node > 0 ? fmt::format(" ({} CPU{} of this node)", slurm->cpus_on_node, slurm->cpus_on_node == 1 ? "" : "s") : std::string();
  if (slurm->visible_devices) {
    // CUDA sees what CUDA_VISIBLE_DEVICES lists: Slurm's choice when it gave GPUs, else the user's own.
    const int usable = gpu_count();
    const std::string visible = "CUDA_VISIBLE_DEVICES=" + *slurm->visible_devices;
    if (usable == 0) {
      return {{Device::cpu()}, fmt::format("the CPU{}: {} names no GPU this node has usable ({})", cpus, visible, job)};
    }
    const std::string whose = slurm->gpus.empty() ? fmt::format("of {} ({} was given no GPU by Slurm itself)", visible, job)
                                                  : fmt::format("Slurm gave {} ({})", job, visible);
    return {parse_devices("all", usable), fmt::format("the {} GPU{} {}", usable, usable == 1 ? "" : "s", whose)};
  }
  if (!slurm->gpus.empty()) {
    // GPUs given, but not exported for CUDA: take the node indices Slurm names as CUDA ordinals.
    std::vector<Device> devices;
    try {
      devices = parse_devices(slurm->gpus, gpu_count());
    } catch (const Error& e) {
      throw Error(fmt::format("{}={} (what Slurm gave {}, taken as CUDA ordinals since CUDA_VISIBLE_DEVICES is not set): {}", slurm->gpus_variable,
                              slurm->gpus, job, e.what_failed()),
                  "Run it in a job as Slurm set it up, or give --devices yourself");
    }
    return {devices, fmt::format("the {} GPU{} Slurm gave {} ({}={}; CUDA_VISIBLE_DEVICES is not set, so they are taken as CUDA ordinals)",
                                 devices.size(), devices.size() == 1 ? "" : "s", job, slurm->gpus_variable, slurm->gpus)};
  }
  return {{Device::cpu()}, fmt::format("the CPU{}: Slurm gave {} no GPU (ask for GPUs with --gpus=N or --gres=gpu:N; --devices 0,1 "
                                       "uses GPUs it did not give)", cpus, job)};
}

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
  if (!device.is_gpu() || device.index < 0) return std::nullopt;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return std::to_string(device.index);
  std::vector<std::string> entries;
  std::stringstream list(visible);
  for (std::string entry; std::getline(list, entry, ',');) {
    const auto first = entry.find_first_not_of(" \t");
    const auto last = entry.find_last_not_of(" \t");
    entries.push_back(first == std::string::npos ? std::string() : entry.substr(first, last - first + 1));
  }
  if (static_cast<size_t>(device.index) >= entries.size() || entries[static_cast<size_t>(device.index)].empty()) return std::nullopt;
  return entries[static_cast<size_t>(device.index)];
}

namespace {
std::atomic<int> narrowed_index{-1};
}  // namespace

void set_narrowed_device(const Device& device) { narrowed_index = device.is_gpu() ? device.index : -1; }

int cuda_ordinal(const Device& device) { return device.is_gpu() && device.index == narrowed_index.load() ? 0 : device.index; }

uint64_t memory_in_use(const Device& device) {
  if (device.is_gpu()) {
    const auto [free_bytes, total_bytes] = detail::CudaDriver::instance().memory_info(cuda_ordinal(device));
    return total_bytes - free_bytes;
  }
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

Device default_device() { return gpu_count() > 0 ? Device::cuda(0) : Device::cpu(); }

int gpu_count() {
  int nodes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 && to_int(std::string_view(name).substr(6))) ++nodes;
  }
  if (nodes == 0) return 0;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    // CUDA stops at the first invalid entry; "" and "-1" hide every GPU.
    int listed = 0;
    std::string_view rest = visible;
    while (!rest.empty()) {
      const size_t comma = std::min(rest.find(','), rest.size());
      const std::string_view item = trim(rest.substr(0, comma));
      if (item.empty() || item.front() == '-') break;
      ++listed;
      rest = comma < rest.size() ? rest.substr(comma + 1) : std::string_view{};
    }
    return std::min(nodes, listed);
  }
  return nodes;
}

}  // namespace ortfleet
