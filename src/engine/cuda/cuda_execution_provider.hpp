#pragma once
// CUDA as an execution provider (runtime/execution_provider.hpp): its GPUs, their memory through the
// driver, CUDA IPC between processes, parking a worker through the driver's checkpoint API, the
// environment set before cuInit, the cuDNN record a worker preloads, the CUDA EP's attachment, and a
// fleet's start ahead of the runtime's load (the EP library, cuInit, each GPU's context). Its options are
// the config's `cuda` section; it marks a cache key with the one of them that changes a graph (NHWC).
#include "engine/runtime/execution_provider.hpp"

namespace ortfleet::detail {

/// The one CUDA provider of the process (engine/providers/ lists it).
const DeviceProvider& cuda_execution_provider();

}  // namespace ortfleet::detail
