#pragma once
// The grammar of shapes and sizes (ortfleet/engine/shape_grammar.hpp) where a dim may take several
// sizes: a shape stream's pattern, "x=1x3x[320:960:32]x[320:960:32]", from which each call's shape is
// drawn.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ortfleet/engine/shape_grammar.hpp"

namespace ortfleet {

/// The sizes one dim may take, as written: one size or a list (`listed`, in the order written), or a
/// range first:last:step (`listed` empty), whose sizes are first, first + step, ... and last.
struct DimSizes {
  std::vector<int64_t> listed;
  int64_t first = 0;
  int64_t last = 0;
  int64_t step = 1;

  /// How many sizes: the list's length, or the range's steps from first to last, last included.
  uint64_t count() const;
  /// The index-th size (index < count()), without building the list a long range would make.
  int64_t at(uint64_t index) const;
};

/// One call's inputs, each dim with the sizes it may take ("x=1x3x[320:960:32]x[320:960:32]": x's
/// dims 2 and 3 take 320, 352, ..., 960), by input name. Each input is named once.
using ShapePattern = std::map<std::string, std::vector<DimSizes>>;

/// Throws ortfleet::Error naming the text, the character where it went wrong and an example.
ShapePattern parse_shape_pattern(const std::string& text);

}  // namespace ortfleet
