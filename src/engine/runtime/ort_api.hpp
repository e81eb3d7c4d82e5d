#pragma once
// The one include of ONNX Runtime's C++ API for our sources. ORT_API_MANUAL_INIT is defined by the
// build (cmake/OrtfleetDependencies.cmake): the API table is installed by load_runtime(), never by
// linking against libonnxruntime. Never call Ort::GetVersionString() or Ort::InitApi() without an
// argument: both reach for the OrtGetApiBase symbol we do not link.
#include <onnxruntime_cxx_api.h>
