#pragma once
// Shapes and sizes written as text: one grammar for every flag, config key and Python argument that
// takes them (--shapes, --batches, --buckets, --shape-mix, --batch, --shape-stream; shapes.declared,
// shapes.buckets; Fleet(shapes=, batches=, buckets=)), parsed in one place
// (src/engine/core/shape_grammar.cpp) and documented once (docs/inference.md#writing-shapes-and-sizes):
//
//   SIZE    a positive whole number                          224
//   SIZES   SIZE, a list SIZE,SIZE,... or a range FIRST:LAST:STEP
//                                                            480,640,960   320:960:128 (320, 448, ..., 960;
//                                                            a last step short of LAST adds LAST)
//   DIM     SIZE, or [SIZES] where a dim may take several    224   [320:960:32]   [480,640,960]
//   SHAPE   NAME=DIMxDIMx...; several inputs joined by ','   x=1x3x224x224   ids=1x128,mask=1x128
//   BUCKETS NAME.DIM=SIZES (DIM counted from 0)              x.2=480,640,960   x.3=320:960:128
//
// SIZES standing alone may also be written in brackets ([480,640,960]); spaces around any part are
// allowed. Every parser here throws ortfleet::Error naming the text, the character where it went wrong
// and an example of what it takes.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ortfleet {

/// The dims of every input of one call, by input name: a shape signature ("input=8x3x224x224").
using InputShapes = std::map<std::string, std::vector<int64_t>>;

/// Sizes one dynamic dim of an input is padded up to ("x.2=480,640,960", "x.3=320:960:128"). Every
/// other input dim with the same symbolic name ("sequence" of input_ids and attention_mask) is padded
/// with it.
struct DimBuckets {
  std::string input;
  int dim = 0;
  std::vector<int64_t> sizes;  ///< ascending, each positive
  bool operator==(const DimBuckets&) const = default;
};

/// SHAPEs: "input=1x3x224x224" -> one signature; "ids=1x128,mask=1x128" -> one signature of two
/// inputs; a name given again starts the next signature ("x=1x3,x=8x3" -> two). One size per dim.
std::vector<InputShapes> parse_shape_list(const std::string& text);
/// SIZES: "1,2,4,8" -> {1, 2, 4, 8} in the order written; "8:32:8" -> {8, 16, 24, 32}.
std::vector<int64_t> parse_batch_list(const std::string& text);
/// BUCKETS: "x.2=480,640,960" or the range "x.3=320:960:128"; the sizes sorted, each once.
DimBuckets parse_buckets(const std::string& text);

/// "x.2=480,640,960": what parse_buckets reads back.
std::string to_string(const DimBuckets& buckets);
/// "ids=1x128,mask=1x128": inputs in name order, dims joined by 'x'; what parse_shape_list reads back.
std::string to_string(const InputShapes& shapes);

}  // namespace ortfleet
