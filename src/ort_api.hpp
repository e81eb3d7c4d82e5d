#pragma once
// The one include of ONNX Runtime's C++ API for our sources. ORT_API_MANUAL_INIT is defined by the
// build (cmake/OrtfleetDependencies.cmake): the API table is installed by load_runtime(), never by
// linking against libonnxruntime. Never call Ort::GetVersionString() or Ort::InitApi() without an
// argument: both reach for the OrtGetApiBase symbol we do not link.
#include <onnxruntime_cxx_api.h>

#include <string>

namespace ortfleet::detail {

/// The OrtApiBase of the loaded runtime; load_runtime() must have succeeded.
const OrtApiBase& ort_api_base();

/// Turns ONNX Runtime's exception text into an ortfleet::Error with a hint for the known causes
/// (missing CUDA libraries, out of memory, unparsable model, ...).
[[noreturn]] void rethrow_ort_error(const Ort::Exception& e, const std::string& doing, const std::string& where = {});

}  // namespace ortfleet::detail
