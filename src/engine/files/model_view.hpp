#pragma once
// A model as ONNX Runtime can read it without parsing its weights, and the fingerprint of its structure.
//
// The view: the graph is handed over in memory (kilobytes to a few megabytes), and each large
// initializer stored inside the .onnx (raw_data) becomes external data that names its own bytes in that
// same file. ONNX Runtime then maps the weights where they lie, as it maps a cache entry's side file,
// instead of copying them out of the protobuf into its graph and again into its tensors (a 1.28 GB
// transformer's session on one H100: 2.24 s, 0.45 s from the view).
//
// The layout: a hash of everything in the .onnx but those weights' bytes (their lengths stand in for
// them). Two models of one layout share their graph and the size of every weight; a model whose layout
// no cache entry or resident session has cannot be one of them, and that is known without reading a
// single weight.
#include <cstdint>
#include <string>

namespace ortfleet::detail {

/// Initializers stored inside the .onnx from this size on are left in place (and left out of the layout).
inline constexpr uint64_t kWeightInPlaceMinBytes = 1024;

struct ModelView {
  std::string model;          ///< the ModelProto to hand ONNX Runtime (the .onnx's folder as its data folder); empty when no weight was left in place
  uint64_t initializers = 0;  ///< initializers left in place
  uint64_t bytes = 0;         ///< their bytes
  uint64_t layout = 0;        ///< XXH64 of the file's bytes with each weight left in place replaced by its length
};

/// The view of the .onnx at `path` whose bytes are mapped at `data` (`size` long). Throws
/// ortfleet::Error for a malformed file.
ModelView view_of(const std::string& path, const void* data, uint64_t size, uint64_t min_bytes = kWeightInPlaceMinBytes);

}  // namespace ortfleet::detail
