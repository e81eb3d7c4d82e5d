#pragma once
// The loaded ONNX Runtime, as the rest of the engine reaches it (ortfleet/engine/runtime.hpp is the
// public side: finding and loading it).
#include "engine/runtime/ort_api.hpp"

namespace ortfleet::detail {

/// The OrtApiBase of the loaded runtime; load_runtime() must have succeeded.
const OrtApiBase& ort_api_base();

}  // namespace ortfleet::detail
