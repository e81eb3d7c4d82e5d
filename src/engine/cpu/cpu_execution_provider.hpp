#pragma once
// The CPU as an execution provider: ONNX Runtime's own CPU EP, sessions in host memory on the host's
// cores. It attaches nothing (ONNX Runtime runs every node it is not told otherwise on the CPU), takes no
// options of its own, marks no cache key beyond the CPU's class, offers no capability (no memory of its
// own, nothing to share between processes or to park) and is prepared by nothing.
#include "engine/runtime/execution_provider.hpp"

namespace ortfleet::detail {

/// The one CPU provider of the process (engine/providers/ lists it).
const DeviceProvider& cpu_execution_provider();

/// The CPU's model and instruction-set flags, hashed: an optimised CPU graph uses the ISA it was made on
/// (e.g. NCHWc block sizes), so another CPU gets its own cache entry.
std::string cpu_identity();

}  // namespace ortfleet::detail
