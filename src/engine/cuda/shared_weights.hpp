#pragma once
// A model's weights on one GPU, uploaded once in large copies, which every ONNX Runtime session of that
// model on that GPU uses in place (SessionOptions::AddInitializer with device memory): a session per
// input shape then does not hold its own copy, and none uploads weights one small copy at a time.
// ONNX Runtime matches the initializers by name after its optimisations: for a model whose graph is
// final (the cache's entry, loaded with graph optimisation off) every weight is used; for a model it
// still optimises (a first start, from the model's view), a weight its optimisations replace (fused)
// goes unused beside the new one, which is why that upload first checks the device holds both.
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

  /// Whether `device`'s free memory holds `bytes` twice over, with room to spare: weights ortfleet uploads
  /// before ONNX Runtime optimises a graph may stand beside the ones its optimisations make anew.
  static bool fit_twice(const Device& device, uint64_t bytes);

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
