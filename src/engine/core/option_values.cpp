// The names of option values and the text a flag gives them: to_string and parse_* of each enum
// (conv search, graph optimisation, the model cache's format and fill, the shape policy), --pad-value
// and --input-range.
#include "engine/core/option_values.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {
namespace detail {
std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace detail

using detail::lower;
using detail::upper;

std::string to_string(ConvAlgoSearch v) {
  switch (v) {
    case ConvAlgoSearch::exhaustive: return "EXHAUSTIVE";
    case ConvAlgoSearch::heuristic: return "HEURISTIC";
    case ConvAlgoSearch::default_algo: return "DEFAULT";
  }
  return "?";
}

std::string to_string(GraphOptimization v) {
  switch (v) {
    case GraphOptimization::disabled: return "disabled";
    case GraphOptimization::basic: return "basic";
    case GraphOptimization::extended: return "extended";
    case GraphOptimization::layout: return "layout";
    case GraphOptimization::all: return "all";
  }
  return "?";
}

std::string to_string(ArenaExtendStrategy v) {
  return v == ArenaExtendStrategy::next_power_of_two ? "kNextPowerOfTwo" : "kSameAsRequested";
}

ConvAlgoSearch parse_conv_algo_search(const std::string& s) {
  const std::string u = upper(s);
  if (u == "EXHAUSTIVE") return ConvAlgoSearch::exhaustive;
  if (u == "HEURISTIC") return ConvAlgoSearch::heuristic;
  if (u == "DEFAULT") return ConvAlgoSearch::default_algo;
  throw Error("unknown conv algorithm search '" + s + "'", "Use EXHAUSTIVE, HEURISTIC or DEFAULT");
}

GraphOptimization parse_graph_optimization(const std::string& s) {
  const std::string l = lower(s);
  if (l == "disabled" || l == "disable" || l == "none") return GraphOptimization::disabled;
  if (l == "basic") return GraphOptimization::basic;
  if (l == "extended") return GraphOptimization::extended;
  if (l == "layout") return GraphOptimization::layout;
  if (l == "all") return GraphOptimization::all;
  throw Error("unknown graph optimization level '" + s + "'", "Use disabled, basic, extended, layout or all");
}

std::string to_string(ModelCacheFormat v) {
  return v == ModelCacheFormat::ort ? "ort" : v == ModelCacheFormat::onnx ? "onnx" : "auto";
}

ModelCacheFormat parse_model_cache_format(const std::string& s) {
  const std::string l = lower(s);
  if (l == "onnx") return ModelCacheFormat::onnx;
  if (l == "ort") return ModelCacheFormat::ort;
  if (l == "auto") return ModelCacheFormat::automatic;
  throw Error("unknown model cache format '" + s + "'", "Use auto, onnx or ort");
}

std::string to_string(ModelCacheFill v) {
  return v == ModelCacheFill::inline_start ? "inline" : v == ModelCacheFill::off ? "off" : "background";
}

ModelCacheFill parse_model_cache_fill(const std::string& s) {
  const std::string l = lower(s);
  if (l == "background") return ModelCacheFill::background;
  if (l == "inline") return ModelCacheFill::inline_start;
  if (l == "off") return ModelCacheFill::off;
  throw Error("unknown model cache fill '" + s + "'", "Use background (after ready), inline (during the start) or off (never write entries)");
}

std::string to_string(TieredStart v) { return v == TieredStart::on ? "on" : v == TieredStart::off ? "off" : "auto"; }

TieredStart parse_tiered_start(const std::string& s) {
  const std::string l = lower(s);
  if (l == "auto") return TieredStart::automatic;
  if (l == "on") return TieredStart::on;
  if (l == "off") return TieredStart::off;
  throw Error("unknown tiered start '" + s + "'", "Use auto (for graphs of many convolutions), on or off");
}

// --- shapes --------------------------------------------------------------------------------------

// The grammar of shapes and sizes (parse_shape_list, parse_buckets, ...) is src/engine/core/shape_grammar.cpp.

std::pair<std::string, double> parse_pad_value(const std::string& text) {
  const std::string hint = "Write it as input=value: " + named(Setting::pad_value, "input_ids=0");
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) throw Error("'" + text + "' is not input=value", hint);
  const std::string number = text.substr(eq + 1);
  const auto value = parse_decimal(number);
  if (!value) throw Error("'" + number + "' in '" + text + "' is not a number", hint);
  return {text.substr(0, eq), *value};
}

const char* to_string(ShapePolicy policy) {
  switch (policy) {
    case ShapePolicy::measured: return "measured";
    case ShapePolicy::per_shape: return "per-shape";
    case ShapePolicy::shared: return "shared";
  }
  return "measured";
}

ShapePolicy parse_shape_policy(const std::string& text) {
  for (const auto p : {ShapePolicy::measured, ShapePolicy::per_shape, ShapePolicy::shared}) {
    if (text == to_string(p)) return p;
  }
  throw Error("unknown shape policy '" + text + "'", "Use measured, per-shape or shared");
}

// --- warm-up inputs ----------------------------------------------------------------------------

std::pair<std::string, ValueRange> parse_input_range(const std::string& text) {
  const char* hint = "Write NAME=VALUE for a constant (sr=16000) or NAME=LO:HI for a range (input_ids=0:30521)";
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) throw Error("'" + text + "' is not NAME=VALUE or NAME=LO:HI", hint);
  auto number = [&](const std::string& part) {
    const auto value = parse_decimal(part);
    if (!value) throw Error("'" + part + "' in '" + text + "' is not a number", hint);
    return *value;
  };
  const std::string value = text.substr(eq + 1);
  const auto colon = value.find(':');
  ValueRange range;
  range.lo = number(value.substr(0, colon));
  range.hi = colon == std::string::npos ? range.lo : number(value.substr(colon + 1));
  if (range.hi < range.lo) throw Error("the range in '" + text + "' ends below where it starts", hint);
  return {text.substr(0, eq), range};
}

}  // namespace ortfleet
