#pragma once
// Where the weights of an ORT-format model (ONNX Runtime's FlatBuffer, `.ort`) lie in its file, read
// without ONNX Runtime: ortfleet uploads them to the GPU in a few large copies and hands them to
// every session by name, instead of ONNX Runtime copying each of thousands of initializers itself.
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/mapped_file.hpp"
#include "engine/model_file.hpp"

namespace ortfleet::detail {

/// True when `path` starts with an ORT-format FlatBuffer (file identifier "ORTM" at byte 4).
bool is_ort_format_file(const std::string& path);

/// The initializers of the ORT-format model at `path` whose bytes lie inline (Tensor.raw_data);
/// string tensors and sparse initializers are left out. Throws ortfleet::Error for a malformed file.
/// `file`, when given, is `path` already mapped (the pages read here are then not faulted in twice).
std::vector<InitializerBytes> ort_format_initializers(const std::string& path, const MappedFile* file = nullptr);

/// The values read by nodes of the ORT-format model at `path` that run on another execution provider
/// than `provider` (e.g. "CUDAExecutionProvider"): the saved graph records each node's provider, and an
/// initializer such a node reads must stay where that provider expects it. Throws ortfleet::Error.
std::unordered_set<std::string> inputs_of_nodes_not_on(const std::string& path, const std::string& provider,
                                                       const MappedFile* file = nullptr);

}  // namespace ortfleet::detail
