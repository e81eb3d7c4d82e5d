#pragma once
// ONNX Runtime's failures as ortfleet errors: a short cause (ONNX Runtime's own text without its
// error-code prefix, source locations and C++ signatures) and a hint that says what to do. The raw
// text is logged at debug level (`ortfleet -v` shows it).
#include <string>
#include <string_view>

#include "engine/runtime/ort_api.hpp"

namespace ortfleet::detail {

struct OrtFailure {
  std::string cause;  ///< one short line: the sentence of ONNX Runtime's message that says what broke
  std::string hint;   ///< what to do, for the known causes; empty otherwise
};
/// Reads ONNX Runtime's exception text (as the C, C++ or Python API print it).
OrtFailure describe_ort_failure(std::string_view raw);

/// Turns ONNX Runtime's exception text into an ortfleet::Error "<doing> failed: <cause>" with a hint
/// for the known causes (missing CUDA libraries, out of memory, unsupported IR version or opset, ...).
[[noreturn]] void rethrow_ort_error(const Ort::Exception& e, const std::string& doing, const std::string& where = {});

}  // namespace ortfleet::detail
