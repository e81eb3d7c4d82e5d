#pragma once
// A model as ONNX Runtime can read it without parsing its weights: the graph is handed over in memory
// (a few kilobytes to megabytes), and each large initializer stored inside the .onnx (raw_data)
// becomes external data that names its own bytes in that same file. ONNX Runtime then maps the
// weights where they lie, as it maps a cache entry's side file, instead of copying them out of the
// protobuf into its graph and again into its tensors.
#include <cstdint>
#include <optional>
#include <string>

namespace ortfleet::detail {

struct WeightsInPlace {
  std::string model;         ///< the ModelProto to hand ONNX Runtime (read with the .onnx's folder as the data folder)
  uint64_t initializers = 0; ///< initializers that now point at their bytes in the file
  uint64_t bytes = 0;        ///< their bytes
};

/// The view of the model at `path` (its bytes mapped at `data`, `size` long): nullopt where it holds
/// fewer than `min_total_bytes` of weights inside the .onnx that are at least `min_bytes` each (nothing
/// to gain: weights already external, a small model). Throws ortfleet::Error for a malformed file.
std::optional<WeightsInPlace> weights_in_place(const std::string& path, const void* data, uint64_t size, uint64_t min_bytes,
                                               uint64_t min_total_bytes);

}  // namespace ortfleet::detail
