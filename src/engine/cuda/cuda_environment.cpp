#include "engine/cuda/cuda_environment.hpp"

#include <cstdlib>
#include <string>

namespace ortfleet::detail {

void apply_cuda_environment(const RunConfig& config) {
  if (!config.session.cuda_module_loading.empty()) ::setenv("CUDA_MODULE_LOADING", config.session.cuda_module_loading.c_str(), 1);
  if (config.session.cuda_max_connections > 0) {
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(config.session.cuda_max_connections).c_str(), 1);
  }
}

}  // namespace ortfleet::detail
