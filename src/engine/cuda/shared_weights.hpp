#pragma once
// A model's weights on one GPU, uploaded once, which every ONNX Runtime session of that model on that
// GPU uses in place (SessionOptions::AddInitializer with device memory): a session per input shape
// then does not hold its own copy. Only for a model whose graph is final (the optimised-model cache's
// entry, loaded with graph optimisation off): ONNX Runtime matches initializers by name after its
// optimisations, and a fused weight would go unused.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_driver.hpp"
#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::detail {

class SharedWeights {
 public:
  /// Uploads the floating-point initializers of `optimised_model` (an ONNX entry's raw or external
  /// bytes, or an ORT-format entry's; 64 elements and up; in an ORT entry, only those no node on another
  /// provider than CUDA reads) into one allocation on `device`. Throws ortfleet::Error.
  SharedWeights(const std::string& optimised_model, const Device& device);
  ~SharedWeights();
  SharedWeights(const SharedWeights&) = delete;
  SharedWeights& operator=(const SharedWeights&) = delete;

  /// Makes a session created with `options` use these weights instead of its own copies.
  void add_to(Ort::SessionOptions& options) const;
  uint64_t bytes() const { return bytes_; }
  size_t count() const { return names_.size(); }
  /// Finding the weights in the entry's files (its initializer table; an ORT entry's nodes too).
  double read_ms() const { return read_ms_; }
  /// Allocating device memory and copying the weights there.
  double upload_ms() const { return upload_ms_; }
  /// Within upload_ms: allocating device memory and describing each weight to ONNX Runtime, then
  /// the staged copies' own parts.
  double prepare_ms() const { return prepare_ms_; }
  const CudaDriver::StagedUploadTimes& staged() const { return staged_; }

 private:
  Device device_;
  void* memory_ = nullptr;
  uint64_t bytes_ = 0;
  double read_ms_ = 0;
  double upload_ms_ = 0;
  double prepare_ms_ = 0;
  CudaDriver::StagedUploadTimes staged_;
  std::vector<std::string> names_;
  std::vector<Ort::Value> values_;  // views of memory_; they own nothing
};

}  // namespace ortfleet::detail
