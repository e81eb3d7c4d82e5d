#pragma once
// The inputs a session's warm-up feeds its model: real ones from the user's file (--warmup-inputs),
// generated ones for the rest (in the ranges the user or the model's metadata gives), and a record of
// what was made up, so that a model that rejects them gets an error saying which input to give.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// One shape's warm-up inputs and what of them ortfleet made up.
struct WarmupInputs {
  std::vector<Tensor> tensors;
  /// One line per generated input: "'x' 1x16000 (dims 1: made up), values in [-1, 1)".
  std::vector<std::string> made_up;
  /// "" when every input came from the file, else the made-up lines joined.
  std::string made_up_text() const;
};

class WarmupInputSource {
 public:
  /// Reads the options' file (if any) and checks it against the model's inputs: every array names an
  /// input, with its element type, rank and fixed dims. Throws ortfleet::Error naming the array.
  /// `model_ranges` are the ranges recorded in the model's metadata; the options' ranges win.
  WarmupInputSource(const WarmupOptions& options, const std::vector<TensorSpec>& inputs,
                    std::map<std::string, ValueRange> model_ranges, int64_t dynamic_dim);

  /// The shape to warm up when none is declared: the file's arrays' dims, the dims their symbolic
  /// names fix in other inputs, and `dynamic_dim` for the rest.
  InputShapes default_shapes() const;
  /// Inputs of `shapes`: the file's array where its dims match, generated otherwise.
  WarmupInputs make(const InputShapes& shapes, uint64_t seed) const;
  /// make() with generated inputs drawn from `ranges` where it names them (the padding check's
  /// one-sided probes), from the source's own ranges elsewhere.
  WarmupInputs make(const InputShapes& shapes, uint64_t seed, const std::map<std::string, ValueRange>& ranges) const;
  /// The ranges generated inputs take: the user's (input_ranges) over the model's metadata.
  const std::map<std::string, ValueRange>& ranges() const { return ranges_; }

 private:
  std::vector<TensorSpec> inputs_;
  std::map<std::string, Tensor> file_;
  std::string file_path_;
  std::map<std::string, ValueRange> ranges_;
  int64_t dynamic_dim_;
};

/// What to do when a model rejects made-up warm-up inputs: the ways to give real ones.
std::string warmup_inputs_hint();

}  // namespace ortfleet::detail
