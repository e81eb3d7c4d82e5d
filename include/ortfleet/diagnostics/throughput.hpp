#pragma once
// `ortfleet bench --inference`: how fast ready sessions serve. A stream of inferences over N devices
// at once against one device, N threads over one session against one session per device, sessions in
// worker processes against sessions in this process; and with a shape mix, a stream of varying batch
// sizes through one ONNX Runtime session against ortfleet's shape-aware sessions; with a shape
// stream, calls of ever-changing shapes through one session, the default shape policy and buckets.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

/// Inference throughput: a stream of batches over N devices at once vs one device, and N threads
/// over one device's session vs one session per device (`bench --inference`). On 1 and on N devices,
/// sessions in worker processes against sessions in this process, with the same session settings.
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
  /// Batch sizes to measure the scaling rows at (the first dim of inputs whose first dim is dynamic),
  /// a set of rows each; empty: the model's own inputs (dynamic dims 1). On GPUs every batch is
  /// measured twice: inputs in host memory, and inputs already on the session's GPU.
  std::vector<int64_t> batches;
  /// Non-empty: a stream of calls whose shapes keep changing (diagnostics/shape_stream.hpp):
  /// "x=1x3x[320:960:32]x[320:960:32]" drawn `stream_count` times from `stream_seed`, or "@FILE".
  std::string shape_stream;
  int stream_count = 24;
  uint64_t stream_seed = 1;
  /// The buckets row runs the stream this many times, each followed by the steady calls of its bucket
  /// shapes: its ratio to them is each round's, median and spread (a shared GPU's clocks drift).
  int stream_rounds = 3;
  bool random_order = false;
  bool anchors = true;            ///< also the onnxruntime Python package's one session (shape mix)
  std::string python = "python3";
  std::function<void(const std::string&)> progress;
  /// Lines worth keeping, said as they come (how long a shape stream's rows will take); nothing when unset.
  std::function<void(const std::string&)> notice;
};

struct ThroughputRow {
  std::string label;
  int devices = 0;
  int threads = 0;
  double inferences_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double speedup = 0;           ///< vs 1 device, 1 thread, in this process, same batch and inputs (shape mix: one session)
  double first_call_ms = 0;     ///< shape mix: the slowest first call of a shape after ready
  double first_call_ratio = 0;  ///< shape mix: the largest first call of a shape / that shape's steady p50
  uint64_t memory_bytes = 0;    ///< shape mix: device memory (GPU) or resident memory (CPU) the sessions added
  int sessions = 0;             ///< shape mix: ONNX Runtime sessions on the device at the end
  int64_t batch = 0;            ///< scaling rows: the batch of every call
  std::string inputs;           ///< scaling rows: where the inputs are, "host" or "device"
  double vs_in_process = 0;     ///< worker rows: inferences/s over the in-process row of the same devices, batch and inputs
  /// Worker rows: input and output bytes that crossed by CUDA IPC (in place), through host shared
  /// memory, and device bytes staged through host memory (Fleet::transfer_counters over the row).
  uint64_t ipc_bytes = 0;
  uint64_t host_bytes = 0;
  uint64_t staged_bytes = 0;
  double stream_ms = 0;         ///< shape stream: the whole stream's time (the sum of its calls)
  std::vector<double> calls_ms;  ///< shape stream: each call's time, in the stream's order
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
