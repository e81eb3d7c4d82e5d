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

/// The session config entry that names the graph transformers ONNX Runtime must not run, separated by
/// semicolons (onnxruntime_session_options_config_keys.h: kOrtSessionOptionsDisableSpecifiedOptimizers).
inline constexpr const char* kDisableOptimizersEntry = "optimization.disable_specified_optimizers";

struct TuneCandidate {
  std::string name;       ///< "conv=HEURISTIC", "model cache", ...
  RunConfig config;
  /// The graph transformers this configuration disables on top of the first configuration's (its
  /// outputs are compared with the first configuration's, and its logged start must not run them).
  std::vector<std::string> disabled_transformers;
};

struct TuneResult {
  TuneCandidate candidate;
  std::vector<double> ready_ms;   ///< exec until ready (session + first inference), per repetition
  double ready_median_ms = 0;
  double first_inference_ms = 0;
  double steady_p50_ms = 0;
  double steady_p99_ms = 0;
  uint64_t memory_bytes = 0;      ///< GPU memory in use at ready (GPU) or the resident set (CPU)
  /// Largest |difference| of its outputs from the first configuration's on the same generated inputs
  /// (configurations that disable transformers; -1: not compared).
  double max_output_difference = -1;
  std::string outputs_differ;     ///< where its outputs differ beyond TuneOptions::output_tolerance ("" when they do not)
  bool pareto = false;            ///< no other configuration is both faster to start and faster to run
  std::string error;
  bool ok() const { return error.empty() && !ready_ms.empty(); }
  /// Measured, and its outputs are the first configuration's: never recommend one that changes them.
  bool recommendable() const { return ok() && outputs_differ.empty(); }
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
  /// The graph transformers of the first configuration's start (from ONNX Runtime's verbose log of its
  /// untimed start), ms, largest first; and in words what disabling the costliest ones saved at start
  /// and cost per call ("disabling GeluFusionL2 saves 235 ms at start and costs 0.12 ms per call").
  std::vector<std::pair<std::string, double>> transformers;
  std::vector<std::string> transformer_findings;
  std::string to_json() const;
};

/// The configurations a sweep tries, on top of `base`: conv algorithm search, max workspace, graph
/// optimisation level (with and without the pre-optimised model cache), memory pattern, arena
/// strategy, intra/inter-op threads, CUDA graph, TF32 and CUDA_MODULE_LOADING (GPU only).
std::vector<TuneCandidate> default_sweep(const Device& device, const RunConfig& base, bool quick);

/// Configurations that disable each of the `count` costliest of `transformers` (ms, largest first) on
/// top of `base`, and all of them together, through kDisableOptimizersEntry (the names appended to any
/// the base disables already).
std::vector<TuneCandidate> transformer_candidates(const TuneCandidate& base, const std::vector<std::pair<std::string, double>>& transformers,
                                                  int count);

struct TuneOptions {
  std::string model;
  Device device = Device::cpu();
  std::vector<TuneCandidate> candidates;  ///< empty: default_sweep(device, base, quick)
  /// Also try disabling each of the graph transformers that cost the first configuration's start the
  /// most (up to this many, and all of them together); 0: none. Their outputs must match the first
  /// configuration's within `output_tolerance` (|a - b| <= tolerance * (1 + |b|)).
  int transformers_to_disable = 3;
  double output_tolerance = 1e-3;
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

/// What disabling transformers did, against the first result: one sentence per configuration that
/// disables some (exposed for tests).
std::vector<std::string> describe_disabled_transformers(const TuneReport& report);

}  // namespace ortfleet
