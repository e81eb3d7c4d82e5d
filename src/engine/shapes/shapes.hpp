#pragma once
// Input shapes against a model's declared inputs: which calls fit and which shapes a session makes at
// start-up (a tensor's sizes, with checked arithmetic, and its shape in words are ortfleet/engine/tensor.hpp's).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet {

/// The dims of each tensor, by name.
InputShapes shapes_of(const std::vector<Tensor>& tensors);

/// Checks one call's shapes against the model's inputs: every input given and no other, ranks as
/// declared, fixed dims as declared, every dim positive. Throws ortfleet::Error naming the input,
/// what it got and the shape the model expects ("[batch, 3, 224, 224]").
void check_shapes(const std::vector<TensorSpec>& inputs, const InputShapes& given);

/// The first symbolic dim ("sequence") that two inputs of `given` declare under one name but were given
/// different sizes, in words: "inputs 'input_ids' [1, 10] and 'attention_mask' [1, 12] share dim
/// 'sequence' but were given 10 and 12"; nullopt when every shared dim agrees. A model names a dim
/// alike in two inputs when they must match (a token and its mask), and its graph fails somewhere
/// inside when they do not, far from the cause.
std::optional<std::string> shared_dim_conflict(const std::vector<TensorSpec>& inputs, const InputShapes& given);

/// `known` with every input it lacks added: dynamic dims take the size a given input fixes for the
/// same symbolic name ("sequence" of input_ids for attention_mask's "sequence"), else `dynamic_dim`.
InputShapes complete_shapes(const std::vector<TensorSpec>& inputs, InputShapes known, int64_t dynamic_dim);

/// The signatures a session makes and warms up at start-up: `options.declared` (inputs left out
/// take the model's dims, dynamic ones as complete_shapes says) and one per `options.batches` entry (the
/// first dim of every input whose first dim is dynamic). Empty when nothing is declared. Each is
/// checked; more than options.max_sessions is an error.
std::vector<InputShapes> resolve_shapes(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, int64_t dynamic_dim);

/// The model's inputs with the concrete dims of `shapes` (for generating inputs of that shape).
std::vector<TensorSpec> with_shapes(const std::vector<TensorSpec>& inputs, const InputShapes& shapes);

/// The declared batch sizes of resolved shapes (first dims of inputs with a dynamic first dim), sorted.
std::vector<int64_t> declared_batches(const std::vector<TensorSpec>& inputs, const std::vector<InputShapes>& shapes);

}  // namespace ortfleet
