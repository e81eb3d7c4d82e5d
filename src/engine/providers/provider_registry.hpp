#pragma once
// Every execution provider this build has, and the one a device belongs to: what the rest of ortfleet
// asks instead of whether a device is a GPU (runtime/execution_provider.hpp says what a provider tells).
#include <cstdint>
#include <vector>

#include "engine/runtime/execution_provider.hpp"

namespace ortfleet::detail {

/// The providers, in the order a machine's devices are listed: the CPU first.
const std::vector<const ExecutionProvider*>& execution_providers();

/// The provider of `kind`'s devices. Throws ortfleet::Error for a kind this build has none for.
const ExecutionProvider& provider_for(Device::Kind kind);
inline const ExecutionProvider& provider_for(const Device& device) { return provider_for(device.kind); }

/// The memory of `device`'s own (a GPU's). Throws ortfleet::Error where its provider computes in host
/// memory: only tensors on such a device (Tensor::on_gpu()) ask.
const DeviceMemory& device_memory(const Device& device);

/// Memory in use where `device` keeps a session's state: the whole GPU's (as the driver reports it), or
/// this process's resident set for the CPU.
uint64_t memory_in_use(const Device& device);

}  // namespace ortfleet::detail
