#pragma once
// An ONNX model file, checked and described before ONNX Runtime parses it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet {

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
  /// The graph's inputs (initializers left out) and outputs as ONNX Runtime reads them, before any
  /// session is made: element type, dims (-1 where dynamic) and the dims' names.
  std::vector<TensorSpec> input_specs;
  std::vector<TensorSpec> output_specs;
  /// The inputs' dims with no fixed size, "input[0] (batch)": each size a call gives them is a shape
  /// of its own to ONNX Runtime's CUDA EP.
  std::vector<std::string> dynamic_dims;
};
/// Walks the model's protobuf structure (weights are skipped, not read). Throws ortfleet::Error.
ModelFacts inspect_model(const std::string& path);

}  // namespace ortfleet
