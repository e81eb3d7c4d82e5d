#pragma once
// `ortfleet bench --inference --shape-stream SPEC`: a stream of calls whose shapes keep changing (images
// of many sizes, sentences of many lengths) through one ONNX Runtime session, ortfleet's default shape
// policy, buckets, and onnxruntime's Python API with one session: per-call p50/p99, first calls, the
// whole stream's time and memory, and the steady p50 of a fixed shape beside onnxruntime's own (the
// in-process call overhead).
#include <cstdint>
#include <string>
#include <vector>

#include "ortfleet/diagnostics/throughput.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// The calls of a stream: SPEC is a shape whose dims may take several sizes,
/// "x=1x3x[320:960:32]x[480,640,960]" (the grammar: ortfleet/engine/shape_grammar.hpp), `count` calls
/// drawn from `seed`, each dim one of its sizes, each shape new while new ones remain; or "@FILE", a
/// shape list per line ("x=1x3x480x640"), as it is. Throws ortfleet::Error.
std::vector<InputShapes> parse_shape_stream(const std::string& spec, size_t count, uint64_t seed);

/// The buckets that serve a stream: for every dim that varies, four sizes or fewer up to its largest.
std::vector<DimBuckets> buckets_for_stream(const std::vector<InputShapes>& stream);

ThroughputReport run_shape_stream(const ThroughputOptions& options);

}  // namespace ortfleet::detail
