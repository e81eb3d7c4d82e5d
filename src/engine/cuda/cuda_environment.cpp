#include "engine/cuda/cuda_environment.hpp"

#include <mutex>
#include <string>

#include "base/system_paths.hpp"

namespace ortfleet::detail {

std::vector<std::string> apply_cuda_environment(const RunConfig& config) {
  static std::mutex writing;  // sessions created in parallel threads: one writes, the others then find it set
  const std::lock_guard lock(writing);
  std::vector<std::string> written;
  const auto set = [&](const char* name, const std::string& value) {
    if (set_env_where_different(name, value)) written.emplace_back(name);
  };
  if (!config.session.cuda_module_loading.empty()) set("CUDA_MODULE_LOADING", config.session.cuda_module_loading);
  if (config.session.cuda_max_connections > 0) set("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(config.session.cuda_max_connections));
  return written;
}

}  // namespace ortfleet::detail
