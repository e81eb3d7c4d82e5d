#include "engine/providers/provider_registry.hpp"

#include "engine/cpu/cpu_execution_provider.hpp"
#include "engine/cuda/cuda_execution_provider.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

const std::vector<const ExecutionProvider*>& execution_providers() {
  // A new provider is a room of its own (engine/<name>/) and a line here (docs/development.md).
  static const std::vector<const ExecutionProvider*> providers = {
      &cpu_execution_provider(),
      &cuda_execution_provider(),
  };
  return providers;
}

const ExecutionProvider& provider_for(Device::Kind kind) {
  for (const ExecutionProvider* p : execution_providers()) {
    if (p->kind() == kind) return *p;
  }
  throw Error("no execution provider for devices of kind " + std::to_string(static_cast<int>(kind)) + " in this build",
              "Use a build of ortfleet with that provider");
}

const DeviceMemory& device_memory(const Device& device) {
  const DeviceMemory* memory = provider_for(device).memory();
  if (memory == nullptr) throw Error(device.to_string() + " has no memory of its own: its tensors live in host memory");
  return *memory;
}

uint64_t memory_in_use(const Device& device) { return provider_for(device).memory_in_use(device); }

}  // namespace ortfleet::detail
