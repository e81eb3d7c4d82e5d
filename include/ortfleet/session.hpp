#pragma once
// One ONNX Runtime session on one device: created with the options of a RunConfig, warmed up on
// generated inputs (so cuDNN algorithm search happens at start-up, not at the first request), and
// run on host or device tensors.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ortfleet/devices.hpp"
#include "ortfleet/options.hpp"
#include "ortfleet/tensor.hpp"
#include "ortfleet/timeline.hpp"

namespace ortfleet {

struct SessionSpec {
  std::string model_path;
  Device device = Device::cpu();
  RunConfig config;
  bool map_model = false;          ///< mmap the model and create the session from memory
  const void* model_data = nullptr;  ///< model bytes already in memory (kept alive by the caller)
  size_t model_size = 0;
  std::string profile_prefix;      ///< non-empty: ONNX Runtime's profiler writes <prefix>_<date>.json
  std::string cache_dir;           ///< where the optimised-model cache lives (config.session.optimized_model_cache)
  int64_t dynamic_dim = 1;         ///< value of dynamic dimensions in generated warm-up inputs
};

/// How the execution provider was attached: "cpu", or for CUDA "plugin", "builtin" or "legacy".
struct ProviderAttachment {
  std::string path;
  std::string library;             ///< the CUDA EP library, when one was used
  std::string note;                ///< why a fallback was taken, or options the path ignores
};

/// Checks that `path` is a readable ONNX model before ONNX Runtime sees it, so that a missing file or
/// a text file named .onnx gives a clear error rather than a protobuf message. Throws ortfleet::Error.
void validate_model_file(const std::string& path);

/// What an ONNX file holds, read without loading its weights.
struct ModelFacts {
  int64_t ir_version = 0;
  int64_t opset = 0;
  int nodes = 0;
  std::map<std::string, int> op_counts;   ///< op type -> nodes
  int initializers = 0;
  uint64_t initializer_bytes = 0;
  bool external_data = false;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};
/// Walks the model's protobuf structure (weights are skipped, not read). Throws ortfleet::Error.
ModelFacts inspect_model(const std::string& path);

class Session {
 public:
  /// Creates the session; phases go into `timeline` (if any) on the device's lane.
  explicit Session(const SessionSpec& spec, Timeline* timeline = nullptr);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  const Device& device() const;
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  const ProviderAttachment& provider() const;
  /// Whether the session came from the optimised-model cache.
  bool used_model_cache() const;

  /// Runs `runs` inferences on generated inputs; the first one pays cuDNN algorithm search.
  void warm_up(int runs = 1, uint64_t seed = 1);
  /// Runs one inference. Inputs may live on the host or on this session's GPU (bound with IO binding,
  /// no copy); outputs come back on the host, or on the GPU when outputs_on_device is true.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool outputs_on_device = false);
  /// Ends ONNX Runtime's profiling and returns the profile's path ("" when profiling was off).
  std::string end_profiling();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
