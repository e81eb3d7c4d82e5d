#pragma once
// Where ONNX Runtime's CUDA execution provider library is, and how it gets attached to a session
// (src/cuda_provider.cpp): the plugin path first (RegisterExecutionProviderLibrary + GetEpDevices +
// SessionOptionsAppendExecutionProvider_V2), then the runtime's built-in CUDA EP (V2 options), then
// the legacy OrtCUDAProviderOptions struct.
#include <optional>
#include <string>
#include <vector>

namespace ortfleet {

struct CudaEpLocation {
  std::string path;
  std::string source;  ///< "ORTFLEET_CUDA_EP", "next to libonnxruntime", ...
  bool exists = false;
};

/// Search order: $ORTFLEET_CUDA_EP (file or folder), the loaded runtime's folder, the copy the
/// set-up fetched, Python onnxruntime-gpu packages. Call after load_runtime() for the second entry.
std::vector<CudaEpLocation> cuda_ep_candidates();

/// The first existing candidate.
std::optional<CudaEpLocation> find_cuda_ep();

/// What the CUDA provider set-up of this process found: the path taken and why.
struct CudaProviderState {
  bool prepared = false;
  std::string library;
  std::string path;            ///< "plugin", "builtin", "legacy" or "" when none works
  std::string plugin_error;    ///< why the plugin path was not taken
  std::vector<int> plugin_devices;  ///< CUDA ordinals the plugin offers an OrtEpDevice for
  double register_ms = 0;
  /// Why this core library and CUDA EP library are known to crash together, "" when they are not: a
  /// core built without CUDA under a CUDA EP built to call back into a CUDA-built core.
  std::string core_mismatch;
};

/// Prepares the CUDA provider once per process (loads and registers the EP library) and reports
/// the outcome. Throws ortfleet::Error only if the runtime is not loaded.
const CudaProviderState& prepare_cuda_provider();

/// Whether prepare_cuda_provider() has already run in this process.
bool cuda_provider_prepared();

/// Loads the CUDA EP library into the process without initialising CUDA, so that its load overlaps
/// other start-up work. Later registration finds it loaded. Returns false if it could not be loaded.
bool preload_cuda_ep_library();

}  // namespace ortfleet
