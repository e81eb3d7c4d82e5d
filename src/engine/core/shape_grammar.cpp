#include "engine/core/shape_grammar.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "ortfleet/base/error.hpp"

namespace ortfleet {

namespace {

// Each error's hint: an example of what the caller parses, then where the grammar is written down.
constexpr const char* kShapesExample = "Write shapes as name=1x3x224x224, several inputs as ids=1x128,mask=1x128";
constexpr const char* kPatternExample =
    "Write a shape whose dims take several sizes as x=1x3x[320:960:32]x[480,640,960] (a list or first:last:step in brackets)";
constexpr const char* kSizesExample = "Write sizes as a list, 1,2,4,8, or a range first:last:step, 8:64:8";
constexpr const char* kBucketsExample = "Write buckets as input.dim=sizes: x.2=480,640,960, or a range x.3=320:960:128 (first:last:step)";
constexpr const char* kGrammarLink = " (the grammar: docs/inference.md#writing-shapes-and-sizes)";

std::string hint(const char* example) { return example + std::string(kGrammarLink); }

/// A range spelled out as a list (buckets, batch sizes) makes fewer sizes than this: more is a step
/// mistyped, and each bucket size costs a session.
constexpr int64_t kMostSpelledOutSizes = 1024;

/// What ends a size: the grammar's punctuation, and spaces.
constexpr std::string_view kSizeEnds = "x,:[]= ";

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

/// A cursor over one text of the grammar. Its errors name the text, the character where it went
/// wrong (counted from 1) and an example of what the caller parses.
class ShapeText {
 public:
  ShapeText(const std::string& text, const char* example) : text_(text), example_(example) {}

  const std::string& text() const { return text_; }
  /// Where the next part starts (spaces skipped).
  size_t next_position() {
    skip_spaces();
    return at_;
  }
  void move_to(size_t position) { at_ = position; }
  bool at_end() { return next_position() == text_.size(); }
  bool next_is(char c) { return next_position() < text_.size() && text_[at_] == c; }
  /// Takes `c` when it comes next.
  bool take(char c) {
    if (!next_is(c)) return false;
    ++at_;
    return true;
  }
  /// Where the next of `stops` (or the end) is: the end of a piece an error quotes.
  size_t next_of(std::string_view stops) const { return std::min(text_.find_first_of(stops, at_), text_.size()); }

  /// SIZE: a positive whole number.
  int64_t size() {
    const size_t start = next_position();
    while (at_ < text_.size() && kSizeEnds.find(text_[at_]) == std::string_view::npos) ++at_;
    if (at_ == start) {
      if (at_ == text_.size()) fail(start, start, "ends where a size should be");
      fail(start, start + 1, "stands where a size should be");
    }
    int64_t value = 0;
    const char* end = text_.data() + at_;
    const auto [parsed_to, problem] = std::from_chars(text_.data() + start, end, value);
    if (parsed_to != end || problem == std::errc::invalid_argument) fail(start, at_, "is not a whole number");
    if (problem == std::errc::result_out_of_range) fail(start, at_, "is too large for a size");
    if (value <= 0) fail(start, at_, "is not positive: dims must be positive");
    return value;
  }

  /// SIZES: a list SIZE,SIZE,... or a range FIRST:LAST:STEP.
  DimSizes sizes() {
    const size_t start = next_position();
    DimSizes out;
    const int64_t first = size();
    if (!take(':')) {
      out.listed = {first};
      while (take(',')) out.listed.push_back(size());
      return out;
    }
    out.first = first;
    out.last = size();
    if (!take(':')) fail(start, next_of(",]"), "is not first:last:step");
    out.step = size();
    if (next_is(':')) fail(start, next_of(",]"), "is not first:last:step");
    if (out.first > out.last) fail(start, at_, "is not first:last:step with first <= last");
    return out;
  }

  /// After the SIZES of a '[' at `open`: its ']'.
  void close_bracket(size_t open) {
    if (take(']')) return;
    if (at_end()) fail(open, text_.size(), "opens a '[' that does not close");
    fail(at_, at_ + 1, "is not expected here: a ']' is");
  }

  /// SIZES standing alone, in brackets or not, up to the end of the text.
  DimSizes sizes_to_end() {
    const size_t open = next_position();
    const bool bracketed = take('[');
    DimSizes out = sizes();
    if (bracketed) close_bracket(open);
    expect_end();
    return out;
  }

  void expect_end() {
    if (!at_end()) fail(at_, at_ + 1, "is not expected here");
  }

  /// Throws: "'PIECE' in 'TEXT' PROBLEM (at character N)", the example and the grammar's page as the hint.
  [[noreturn]] void fail(size_t from, size_t to, const std::string& problem) const {
    const std::string piece = text_.substr(from, std::min(to, text_.size()) - from);
    const std::string subject = piece.empty() || piece == text_ ? "'" + text_ + "'" : "'" + piece + "' in '" + text_ + "'";
    throw Error(subject + " " + problem + " (at character " + std::to_string(from + 1) + ")", hint(example_));
  }

 private:
  void skip_spaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }

  const std::string& text_;
  const char* example_;
  size_t at_ = 0;
};

/// One SHAPE as written: an input's name and its dims' sizes.
struct WrittenInput {
  std::string name;
  size_t at = 0;  ///< where the name starts, for errors
  std::vector<DimSizes> dims;
};

/// DIM: a SIZE, or [SIZES] where `several` sizes are allowed.
DimSizes read_dim(ShapeText& in, bool several) {
  const size_t start = in.next_position();
  if (in.take('[')) {
    DimSizes out = in.sizes();
    in.close_bracket(start);
    if (!several) in.fail(start, in.next_position(), "gives several sizes, and these shapes take one size per dim");
    return out;
  }
  DimSizes out;
  out.listed = {in.size()};
  if (in.next_is(':')) {
    in.fail(start, in.next_of(",x]"), several ? "is a range: write it in brackets, [320:960:32]"
                                              : "is a range, and these shapes take one size per dim");
  }
  return out;
}

/// SHAPE: NAME=DIMxDIMx...
WrittenInput read_input(ShapeText& in, bool several) {
  WrittenInput out;
  out.at = in.next_position();
  // The item ends at the next ',' outside brackets; a name has no brackets, so its '=' comes first.
  const std::string& text = in.text();
  size_t end = out.at;
  for (int depth = 0; end < text.size() && (depth > 0 || text[end] != ','); ++end) depth += text[end] == '[' ? 1 : text[end] == ']' ? -1 : 0;
  const size_t eq = text.find('=', out.at);
  if (eq < end) out.name = trimmed(text.substr(out.at, eq - out.at));
  if (out.name.empty() || eq + 1 >= end) in.fail(out.at, end, "is not name=dims");
  in.move_to(eq + 1);
  do {
    out.dims.push_back(read_dim(in, several));
  } while (in.take('x'));
  return out;
}

/// SHAPE,SHAPE,... to the end of the text.
std::vector<WrittenInput> read_inputs(ShapeText& in, bool several) {
  if (in.at_end()) throw Error("no shape given", hint(several ? kPatternExample : kShapesExample));
  std::vector<WrittenInput> out;
  do {
    out.push_back(read_input(in, several));
  } while (in.take(','));
  in.expect_end();
  return out;
}

/// The sizes of `sizes` one by one, for the parsers that keep a list.
std::vector<int64_t> spelled_out(const DimSizes& sizes, const std::string& text) {
  if (sizes.listed.empty() && (sizes.last - sizes.first) / sizes.step >= kMostSpelledOutSizes) {
    throw Error("'" + text + "' makes more than " + std::to_string(kMostSpelledOutSizes) + " sizes", "Take a larger step");
  }
  std::vector<int64_t> out;
  for (uint64_t i = 0; i < sizes.count(); ++i) out.push_back(sizes.at(i));
  return out;
}

}  // namespace

uint64_t DimSizes::count() const {
  if (!listed.empty()) return listed.size();
  const auto span = static_cast<uint64_t>(last - first);
  const auto stride = static_cast<uint64_t>(step);
  return span / stride + 1 + (span % stride != 0 ? 1 : 0);
}

int64_t DimSizes::at(uint64_t index) const {
  if (!listed.empty()) return listed.at(index);
  const auto offset = index * static_cast<uint64_t>(step);  // no overflow: index < count()
  return offset >= static_cast<uint64_t>(last - first) ? last : first + static_cast<int64_t>(offset);
}

std::vector<InputShapes> parse_shape_list(const std::string& text) {
  ShapeText in(text, kShapesExample);
  std::vector<InputShapes> out;
  for (const auto& input : read_inputs(in, false)) {
    if (out.empty() || out.back().count(input.name)) out.emplace_back();
    auto& dims = out.back()[input.name];
    for (const auto& dim : input.dims) dims.push_back(dim.listed.front());
  }
  return out;
}

ShapePattern parse_shape_pattern(const std::string& text) {
  ShapeText in(text, kPatternExample);
  ShapePattern out;
  for (auto& input : read_inputs(in, true)) {
    if (out.count(input.name)) in.fail(input.at, input.at + input.name.size(), "names an input a second time");
    out[input.name] = std::move(input.dims);
  }
  return out;
}

std::vector<int64_t> parse_batch_list(const std::string& text) {
  ShapeText in(text, kSizesExample);
  if (in.at_end()) throw Error("no batch size given", hint(kSizesExample));
  return spelled_out(in.sizes_to_end(), text);
}

DimBuckets parse_buckets(const std::string& text) {
  ShapeText in(text, kBucketsExample);
  const auto eq = text.find('=');
  const auto dot = text.rfind('.', eq);
  if (eq == std::string::npos || dot == std::string::npos || dot == 0 || dot + 1 == eq || eq + 1 == text.size()) {
    in.fail(0, text.size(), "is not input.dim=sizes");
  }
  DimBuckets out;
  out.input = trimmed(text.substr(0, dot));
  const std::string dim = trimmed(text.substr(dot + 1, eq - dot - 1));
  if (dim.empty() || dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 4) in.fail(dot + 1, eq, "is not a dim index");
  out.dim = std::stoi(dim);
  in.move_to(eq + 1);
  out.sizes = spelled_out(in.sizes_to_end(), text);
  std::sort(out.sizes.begin(), out.sizes.end());
  out.sizes.erase(std::unique(out.sizes.begin(), out.sizes.end()), out.sizes.end());
  return out;
}

std::string to_string(const DimBuckets& b) {
  std::string out = b.input + "." + std::to_string(b.dim) + "=";
  for (size_t i = 0; i < b.sizes.size(); ++i) out += (i ? "," : "") + std::to_string(b.sizes[i]);
  return out;
}

std::string to_string(const InputShapes& shapes) {
  std::string out;
  for (const auto& [name, dims] : shapes) {
    out += (out.empty() ? "" : ",") + name + "=";
    for (size_t i = 0; i < dims.size(); ++i) out += (i ? "x" : "") + std::to_string(dims[i]);
  }
  return out;
}

}  // namespace ortfleet
