#pragma once
// The CUDA environment variables a config asks for. They act only before the process's first CUDA
// call (cuInit), so the fleet sets them before it starts initialising CUDA.
#include <string>
#include <vector>

#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// Sets CUDA_MODULE_LOADING and CUDA_DEVICE_MAX_CONNECTIONS when the config names them, and only where
/// the variable does not already hold that value: setenv while another thread reads the environment (a
/// worker being spawned, ONNX Runtime or CUDA starting) is a data race, so a process whose threads each
/// create a session writes each variable once, not once per session. Returns the names it wrote.
std::vector<std::string> apply_cuda_environment(const RunConfig& config);

}  // namespace ortfleet::detail
