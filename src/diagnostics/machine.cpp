#include "diagnostics/machine.hpp"
#include "ortfleet/engine/cuda_devices.hpp"

#include <fmt/format.h>

#include <thread>

namespace ortfleet::detail {

std::string machine_description(const std::vector<Device>& devices) {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  const auto& driver = probe_cuda_driver();
  if (devices.empty() || !devices.front().is_cuda() || driver.gpus.empty()) return fmt::format("CPU only, {} CPUs", cpus);
  return fmt::format("{} x {}, {} CPUs", driver.gpus.size(), driver.gpus.front().name, cpus);
}

}  // namespace ortfleet::detail
