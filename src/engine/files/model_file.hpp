#pragma once
// Where a model's weights lie in its files (the public side, ortfleet/engine/model_file.hpp, checks
// and describes a model).
#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace ortfleet::detail
