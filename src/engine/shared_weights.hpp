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

#include "engine/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::detail {

class SharedWeights {
 public:
  /// Uploads the floating-point initializers of `optimised_model` (raw or external bytes, 1 KiB and up)
  /// into one allocation on `device`. Throws ortfleet::Error.
  SharedWeights(const std::string& optimised_model, const Device& device);
  ~SharedWeights();
  SharedWeights(const SharedWeights&) = delete;
  SharedWeights& operator=(const SharedWeights&) = delete;

  /// Makes a session created with `options` use these weights instead of its own copies.
  void add_to(Ort::SessionOptions& options) const;
  uint64_t bytes() const { return bytes_; }
  size_t count() const { return names_.size(); }
  double upload_ms() const { return upload_ms_; }

 private:
  Device device_;
  void* memory_ = nullptr;
  uint64_t bytes_ = 0;
  double upload_ms_ = 0;
  std::vector<std::string> names_;
  std::vector<Ort::Value> values_;  // views of memory_; they own nothing
};

}  // namespace ortfleet::detail
