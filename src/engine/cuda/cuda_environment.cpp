#include "engine/cuda/cuda_environment.hpp"

#include <cstdlib>
#include <mutex>
#include <string>

namespace ortfleet::detail {
namespace {

/// Writes `name` only where it differs from `value`; the caller holds the lock.
void set_where_different(const char* name, const std::string& value, std::vector<std::string>& written) {
  const char* now = std::getenv(name);
  if (now != nullptr && value == now) return;
  ::setenv(name, value.c_str(), 1);
  written.emplace_back(name);
}

}  // namespace

std::vector<std::string> apply_cuda_environment(const RunConfig& config) {
  static std::mutex writing;  // sessions created in parallel threads: one writes, the others then find it set
  const std::lock_guard lock(writing);
  std::vector<std::string> written;
  if (!config.session.cuda_module_loading.empty()) set_where_different("CUDA_MODULE_LOADING", config.session.cuda_module_loading, written);
  if (config.session.cuda_max_connections > 0) {
    set_where_different("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(config.session.cuda_max_connections), written);
  }
  return written;
}

}  // namespace ortfleet::detail
