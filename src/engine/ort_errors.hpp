#pragma once
// ONNX Runtime's failures as ortfleet errors: the raw text says what broke, the hint says what to do.
#include <string>

#include "engine/ort_api.hpp"

namespace ortfleet::detail {

/// Turns ONNX Runtime's exception text into an ortfleet::Error with a hint for the known causes
/// (missing CUDA libraries, out of memory, unparsable model, ...).
[[noreturn]] void rethrow_ort_error(const Ort::Exception& e, const std::string& doing, const std::string& where = {});

}  // namespace ortfleet::detail
