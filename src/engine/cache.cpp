#include "ortfleet/engine/cache.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/cuda_driver.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "base/system_paths.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}
/// The CPU model and instruction-set flags: an optimised CPU graph uses the ISA it was made on
/// (e.g. NCHWc block sizes), so another CPU gets its own entry.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string model;
  std::string flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  return std::to_string(fnv1a(model + flags));
}
}  // namespace

std::string ModelCache::default_root() {
  if (auto v = detail::env_var("ORTFLEET_CACHE")) return *v;
  if (auto v = detail::env_var("XDG_CACHE_HOME")) return (fs::path(*v) / "ortfleet").string();
  if (auto v = detail::env_var("HOME")) return (fs::path(*v) / ".cache" / "ortfleet").string();
  return (fs::temp_directory_path() / "ortfleet-cache").string();
}

ModelCache::ModelCache(std::string dir) : dir_(dir.empty() ? (fs::path(default_root()) / "models").string() : std::move(dir)) {}

std::string ModelCache::key_text(const std::string& model_path, const Device& device, const RunConfig& config) {
  std::error_code ec;
  const std::string absolute = fs::weakly_canonical(model_path, ec).string();
  struct stat st {};
  if (::stat(model_path.c_str(), &st) != 0) throw Error("cannot stat model " + model_path, "Check the path");
  const RuntimeInfo* rt = loaded_runtime();
  std::string device_class = "cpu-" + cpu_identity();
  if (device.is_gpu()) {
    // Only this GPU's compute capability: enumerating every GPU (and NVML) cost 70-100 ms per start.
    auto& driver = detail::CudaDriver::instance();
    device_class = "cuda";
    if (driver.ok()) {
      device_class += "-sm_" + std::to_string(driver.attribute(device.index, detail::CudaDriver::kComputeCapabilityMajor) * 10 +
                                             driver.attribute(device.index, detail::CudaDriver::kComputeCapabilityMinor));
    }
  }
  std::string key = absolute + "|size=" + std::to_string(st.st_size) +
                    "|mtime=" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
                    "|ino=" + std::to_string(st.st_ino) + "|ort=" + (rt ? rt->version : "?") + "|device=" + device_class +
                    "|opt=" + to_string(config.session.graph_optimization);
  if (device.is_gpu()) key += "|nhwc=" + std::string(config.cuda.prefer_nhwc ? "1" : "0");
  for (const auto& [k, v] : config.session.config_entries) key += "|" + k + "=" + v;
  return key;
}

std::string ModelCache::entry_path(const std::string& model_path, const Device& device, const RunConfig& config) const {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(fnv1a(key_text(model_path, device, config))));
  return (fs::path(dir_) / (fs::path(model_path).stem().string() + "-" + hash + ".onnx")).string();
}

std::vector<CacheEntry> ModelCache::entries() const {
  std::vector<CacheEntry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".onnx") continue;
    uint64_t bytes = e.file_size(ec);
    const fs::path data = e.path().string() + ".data";  // the weights, stored beside the graph
    if (fs::exists(data, ec)) bytes += fs::file_size(data, ec);
    out.push_back({e.path().string(), bytes});
  }
  return out;
}

void ModelCache::clear() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) fs::remove(e.path(), ec);
}

}  // namespace ortfleet
