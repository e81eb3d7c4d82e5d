#pragma once
// `ortfleet tune`: sweeps the options that trade start-up time for inference speed, each in a fresh
// process, marks the Pareto front and recommends a "start fast" and a "serve fast" configuration.
#include <functional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

struct TuneCandidate {
  std::string name;       ///< "conv=HEURISTIC", "model cache", ...
  RunConfig config;
};

struct TuneResult {
  TuneCandidate candidate;
  std::vector<double> ready_ms;   ///< exec until ready (session + first inference), per repetition
  double ready_median_ms = 0;
  double first_inference_ms = 0;
  double steady_p50_ms = 0;
  double steady_p99_ms = 0;
  uint64_t memory_bytes = 0;      ///< GPU memory in use at ready (GPU) or the resident set (CPU)
  bool pareto = false;            ///< no other configuration is both faster to start and faster to run
  std::string error;
  bool ok() const { return error.empty() && !ready_ms.empty(); }
};

struct TuneReport {
  std::string model;
  std::string device;
  std::vector<TuneResult> results;
  int start_fast = -1;   ///< index into results
  int serve_fast = -1;
  /// A model with a dynamic batch: what a batch switch costs one ONNX Runtime session under the
  /// serve-fast configuration, and what to do about it.
  ShapeSwitchCost shape_switch;
  std::string shapes_advice;
  std::string to_json() const;
};

/// The configurations a sweep tries, on top of `base`: conv algorithm search, max workspace, graph
/// optimisation level (with and without the pre-optimised model cache), memory pattern, arena
/// strategy, intra/inter-op threads, CUDA graph, TF32 and CUDA_MODULE_LOADING (GPU only).
std::vector<TuneCandidate> default_sweep(const Device& device, const RunConfig& base, bool quick);

struct TuneOptions {
  std::string model;
  Device device = Device::cpu();
  std::vector<TuneCandidate> candidates;  ///< empty: default_sweep(device, base, quick)
  RunConfig base;
  bool quick = false;
  int repetitions = 1;   ///< timed cold starts per configuration (after one untimed)
  int steady_runs = 30;  ///< inferences after the first, for p50/p99
  std::string ortfleet_executable;
  std::string ort_library;
  std::string cache_dir;  ///< for the model-cache configurations (default: a fresh temporary folder)
  double timeout_s = 3600;
  double shape_switch_seconds = 1;  ///< per stream of the shape-switch measurement (dynamic batch only); 0 skips it
  std::function<void(const std::string&)> progress;
};

TuneReport run_tune(const TuneOptions& options);

/// Marks the Pareto front on (ready time, steady p50) and picks the recommendations (exposed for tests).
void choose(TuneReport& report);

}  // namespace ortfleet
