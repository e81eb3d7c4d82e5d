#pragma once
// `ortfleet tune`: sweeps the options that trade start-up time for inference speed, each in fresh
// processes, in interleaved rounds (every configuration once a round, so that the machine's drifts
// touch all alike) until each one's spread is known or the budget is spent. It marks the Pareto front
// and recommends a "start fast" and a "serve fast" configuration only for a gain over the first
// configuration beyond noise, as bench judges noise (statistics.hpp); otherwise it says the
// difference is within noise, and recommends nothing.
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"
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
  std::vector<double> ready_ms;   ///< exec until ready (session + first inference), per timed round
  double ready_mean_ms = 0;       ///< the mean of ready_ms: the statistic tune compares and prints
  double ready_sigma_ms = 0;      ///< their sample standard deviation (0 below two rounds)
  double first_inference_ms = 0;  ///< mean over the rounds
  std::vector<double> p50_per_round;  ///< each timed round's steady p50
  double steady_p50_ms = 0;       ///< the mean of p50_per_round
  double steady_p99_ms = 0;       ///< p99 of every steady inference of every round
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
  int rounds = 0;        ///< timed rounds run (fewer than asked when the budget cut them)
  /// The recommendations, indices into results: a configuration faster than the first beyond noise
  /// (within noise of the fastest, the first such in the sweep's order); -1 when none is.
  int start_fast = -1;
  int serve_fast = -1;
  /// What was found, in one line each: the recommendation and its gain with its ±, or that no
  /// configuration beats the first beyond noise (and which came closest).
  std::string start_verdict;
  std::string serve_verdict;
  /// A model with a dynamic batch: what a batch switch costs one ONNX Runtime session under the
  /// serve-fast configuration, and what to do about it.
  ShapeSwitchCost shape_switch;
  std::string shapes_advice;
  /// The graph transformers of the first configuration's start (from ONNX Runtime's verbose log of its
  /// untimed starts: each one's median ms), largest first; and in words what disabling the costliest ones
  /// saved at start and cost per call ("disabling GeluFusionL2 saves 235 ms at start and costs 0.12 ms
  /// per call"), a saving never more than the transformer took in the logged starts.
  std::vector<std::pair<std::string, double>> transformers;
  std::vector<std::string> transformer_findings;
  std::string to_json() const;
};

/// The configurations a sweep tries, on top of `base`: conv algorithm search, max workspace, graph
/// optimisation level (with and without the pre-optimised model cache), memory pattern, arena
/// strategy, intra/inter-op threads, CUDA graph, TF32 and CUDA_MODULE_LOADING (GPU only).
std::vector<TuneCandidate> default_sweep(const Device& device, const RunConfig& base, bool quick);

/// The graph transformers of several logged starts of one configuration, and the costliest of them
/// told apart from noise: what tune tries disabling.
struct TransformerCosts {
  /// Every transformer, by the median of its times over the starts (ms), largest first (equal ones by name).
  std::vector<std::pair<std::string, double>> medians;
  /// The costliest, at most `count`: each took longer in every start than any transformer left out took in
  /// any (each one's highest and lowest time left out, and any 4 times off its median: preemptions), so
  /// that another run of tune picks the same set; fewer when the next are within noise of them.
  std::vector<std::pair<std::string, double>> costliest;
  /// When the set stops short of `count` for noise: which came next and why they were not tried ("" otherwise).
  std::string note;
};
TransformerCosts transformer_costs(const std::vector<std::vector<std::pair<std::string, double>>>& starts, int count);

/// Configurations that disable each of the `count` costliest of `transformers` (ms, largest first) on
/// top of `base`, and all of them together, through kDisableOptimizersEntry (the names appended to any
/// the base disables already).
std::vector<TuneCandidate> transformer_candidates(const TuneCandidate& base, const std::vector<std::pair<std::string, double>>& transformers,
                                                  int count);

struct TuneOptions {
  /// What rounds and steady_runs take: the one check of --repeat and --runs and of Python's rounds= and
  /// runs= (budget_s: kRoundsBudgetRule, bench.hpp). A p99 needs two runs at least.
  static constexpr ValueRule kRoundsRule{.kind = ValueKind::whole, .lo = 1, .hi = 100};
  static constexpr ValueRule kSteadyRunsRule{.kind = ValueKind::whole, .lo = 2, .hi = 100000};
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
  /// Timed rounds, each a cold start of every configuration (after one untimed start of each): five,
  /// so that each one's spread is known and a gain can be told from noise.
  int rounds = 5;
  /// Seconds the timed rounds may take (0: no limit): once the first round shows what one costs, the
  /// rest are cut to fit, at least two (a spread needs two).
  double budget_s = 0;
  int steady_runs = 30;  ///< inferences after the first, for p50/p99
  std::string ortfleet_executable;
  std::string ort_library;
  std::string cache_dir;  ///< for the model-cache configurations (default: a fresh temporary folder)
  double timeout_s = 3600;
  double shape_switch_seconds = 1;  ///< per stream of the shape-switch measurement (dynamic batch only); 0 skips it
  std::function<void(const std::string&)> progress;  ///< one status line at a time
  std::function<void(const std::string&)> notice;    ///< lines worth keeping (the plan, rounds cut to the budget)
  /// Ends the sweep when requested (Ctrl-C in Python): its child start is stopped and run_tune throws.
  std::stop_token stop;
};

TuneReport run_tune(const TuneOptions& options);

/// Marks the Pareto front on (mean ready time, mean steady p50) and picks the recommendations: for
/// each goal, a gain over the first result beyond noise or none, with its verdict (exposed for tests).
void choose(TuneReport& report);

/// What disabling transformers did, against the first result: one sentence per configuration that
/// disables some (exposed for tests).
std::vector<std::string> describe_disabled_transformers(const TuneReport& report);

}  // namespace ortfleet
