#pragma once
// Tensors in a device's own memory (a GPU's): made there, copied up from the host and down again, each
// through the memory of the device's execution provider (src/engine/providers/device_tensor.cpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet {

/// `bytes` of uninitialised memory on `device` (a GPU's primary context), freed with the last copy of
/// the tensor. Throws ortfleet::Error for a device with no memory of its own (the CPU).
Tensor allocate_on_device(std::string name, ElementType type, std::vector<int64_t> shape, size_t bytes, const Device& device);
/// A copy of host tensor `host` in `device`'s memory, freed with the last copy of the tensor.
Tensor copy_to_device(const Tensor& host, const Device& device);
/// A host copy of device tensor `on_device`.
Tensor copy_to_host(const Tensor& on_device);

}  // namespace ortfleet
