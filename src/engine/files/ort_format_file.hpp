#pragma once
// Where the weights of an ORT-format model (ONNX Runtime's FlatBuffer, `.ort`) lie in its file, read
// without ONNX Runtime: ortfleet uploads them to the GPU in a few large copies and hands them to
// every session by name, instead of ONNX Runtime copying each of thousands of initializers itself.
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"

namespace ortfleet::detail {

// Each reader takes the file mapped by its caller, who copies the weights out of the same mapping:
// the pages read here are not faulted in twice.

/// True when `file` starts with an ORT-format FlatBuffer (file identifier "ORTM" at byte 4).
bool has_ort_format_identifier(const MappedFile& file);

/// The initializers of the ORT-format model in `file` whose bytes lie inline (Tensor.raw_data);
/// string tensors and sparse initializers are left out. Throws ortfleet::Error for a malformed file.
std::vector<InitializerBytes> ort_format_initializers(const MappedFile& file);

/// The values read by nodes of the ORT-format model in `file` that run on another execution provider
/// than `provider` (e.g. "CUDAExecutionProvider"): the saved graph records each node's provider, and an
/// initializer such a node reads must stay where that provider expects it. Throws ortfleet::Error.
std::unordered_set<std::string> inputs_of_nodes_not_on(const MappedFile& file, const std::string& provider);

}  // namespace ortfleet::detail
