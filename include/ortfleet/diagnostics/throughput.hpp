#pragma once
// `ortfleet bench --inference`: how fast ready sessions serve. A stream of inferences over N devices
// at once against one device, N threads over one session against one session per device, sessions in
// worker processes against sessions in this process; and with a shape mix, a stream of varying batch
// sizes through one ONNX Runtime session against ortfleet's shape-aware sessions.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

/// Inference throughput: a stream of batches over N devices at once vs one device, and N threads
/// over one device's session vs one session per device (`bench --inference`).
struct ThroughputOptions {
  std::string model;
  std::vector<Device> devices;
  double seconds = 5;
  RunConfig config;
  std::string ort_library;
  /// Non-empty: instead of scaling over devices, a stream of calls whose batch size cycles through
  /// these sizes (or is drawn from them), on the first device: one ONNX Runtime session (what
  /// ONNX Runtime alone does), shape-aware sessions, and each size alone.
  std::vector<int64_t> shape_mix;
  bool random_order = false;
  bool anchors = true;            ///< also the onnxruntime Python package's one session (shape mix)
  std::string python = "python3";
  std::function<void(const std::string&)> progress;
};

struct ThroughputRow {
  std::string label;
  int devices = 0;
  int threads = 0;
  double inferences_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double speedup = 0;           ///< vs the first row
  double first_call_ms = 0;     ///< shape mix: the slowest first call of a shape after ready
  double first_call_ratio = 0;  ///< shape mix: the largest first call of a shape / that shape's steady p50
  uint64_t memory_bytes = 0;    ///< shape mix: device memory (GPU) or resident memory (CPU) the sessions added
  int sessions = 0;             ///< shape mix: ONNX Runtime sessions on the device at the end
  std::string error;            ///< why the row could not be measured
};

struct ThroughputReport {
  std::string model;
  std::string machine;
  std::vector<ThroughputRow> rows;
  std::vector<std::string> notes;  ///< "shape-aware is 48.2x faster than one session (shape mix 1,2)", ...
  std::string to_json() const;
};

ThroughputReport run_throughput(const ThroughputOptions& options);

}  // namespace ortfleet
