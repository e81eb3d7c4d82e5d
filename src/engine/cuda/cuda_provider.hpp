#pragma once
// Attaching the CUDA execution provider to session options (the public side, ortfleet/engine/
// cuda_provider.hpp, finds and registers its library).
#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// Appends the CUDA EP for GPU `ordinal` to `options`. Throws ortfleet::Error naming the device.
ProviderAttachment attach_cuda(Ort::SessionOptions& options, int ordinal, const CudaOptions& cuda);

}  // namespace ortfleet::detail
