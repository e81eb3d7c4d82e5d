#pragma once
// Attaching the CUDA execution provider to session options (the public side, ortfleet/engine/
// cuda_provider.hpp, finds and registers its library).
#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// What a core built without CUDA does under ONNX Runtime 1.29's CUDA EP library, a provider-bridge
/// one whose kernels call back into the core for shared CPU code (doctor's ort-core finding, bench's
/// Python anchor rows).
inline constexpr const char* kCpuCoreUnderCudaEp =
    "calls back into a CUDA-built core: models whose kernels do (Resize with sizes, Slice, If, Concat, ...) crash inside ONNX "
    "Runtime with SIGSEGV";

/// Appends the CUDA EP for GPU `ordinal` to `options`. Throws ortfleet::Error naming the device.
ProviderAttachment attach_cuda(Ort::SessionOptions& options, int ordinal, const CudaOptions& cuda);

}  // namespace ortfleet::detail
