#pragma once
// Attaching the CUDA execution provider to session options (see ortfleet/providers.hpp).
#include "ort_api.hpp"
#include "ortfleet/options.hpp"
#include "ortfleet/session.hpp"

namespace ortfleet::detail {

/// Appends the CUDA EP for GPU `ordinal` to `options`. Throws ortfleet::Error naming the device.
ProviderAttachment attach_cuda(Ort::SessionOptions& options, int ordinal, const CudaOptions& cuda);

}  // namespace ortfleet::detail
