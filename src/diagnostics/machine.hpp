#pragma once
// The machine a measurement ran on, in the words every report uses.
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"

namespace ortfleet::detail {

/// "4 x NVIDIA H200, 64 CPUs" for GPU devices, else "CPU only, 2 CPUs".
std::string machine_description(const std::vector<Device>& devices);

}  // namespace ortfleet::detail
