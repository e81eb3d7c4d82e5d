#pragma once
// The CUDA environment variables a config asks for. They act only before the process's first CUDA
// call (cuInit), so the fleet sets them before it starts initialising CUDA.
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// Sets CUDA_MODULE_LOADING and CUDA_DEVICE_MAX_CONNECTIONS when the config names them.
void apply_cuda_environment(const RunConfig& config);

}  // namespace ortfleet::detail
