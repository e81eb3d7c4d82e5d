#pragma once
// CUDA as an execution provider (runtime/execution_provider.hpp): its GPUs, their memory through the
// driver, CUDA IPC between processes, parking a worker through the driver's checkpoint API, the
// environment set before cuInit, the cuDNN record a worker preloads, and the CUDA EP's attachment.
#include "engine/runtime/execution_provider.hpp"

namespace ortfleet::detail {

/// The one CUDA provider of the process (engine/providers/ lists it).
const ExecutionProvider& cuda_execution_provider();

}  // namespace ortfleet::detail
