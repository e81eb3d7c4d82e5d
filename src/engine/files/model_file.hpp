#pragma once
// Where a model's weights lie in its files (the public side, ortfleet/engine/model_file.hpp, checks
// and describes a model).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// One initializer whose bytes lie as they are in a file: raw_data in the .onnx, or external data.
struct InitializerBytes {
  std::string name;
  ElementType type = ElementType::undefined;
  std::vector<int64_t> dims;
  std::string file;     ///< the .onnx itself or its external data file (absolute)
  uint64_t offset = 0;  ///< where its bytes start in `file`
  uint64_t bytes = 0;
};

/// The initializers of the model at `path` stored as raw bytes (typed fields such as float_data are
/// left out: ONNX Runtime writes small tensors that way). Throws ortfleet::Error for a malformed file.
std::vector<InitializerBytes> initializer_bytes(const std::string& path);

/// Why ONNX Runtime cannot load or run the model at `path` although its file is sound, as the Error
/// to report (what is wrong and the fix), or nullopt when its structure shows no reason: a graph
/// that declares no outputs, or subgraphs (the bodies of If, Loop and Scan) nested deeper than ONNX
/// Runtime's protobuf reader goes. Walks every node, so it is for after ONNX Runtime refused a model.
std::optional<Error> model_structure_problem(const std::string& path);

/// Checks the inputs and outputs ONNX Runtime read from the model at `path`: refuses a model with no
/// outputs and an input dim declared below -1; warns (once per model and process) of a dim declared
/// -1, which ONNX Runtime reads as dynamic. Reads the file only where an input has a dim with neither
/// size nor name. Throws ortfleet::Error.
void check_model_interface(const std::string& path, const std::vector<TensorSpec>& inputs, const std::vector<TensorSpec>& outputs);

}  // namespace ortfleet::detail
