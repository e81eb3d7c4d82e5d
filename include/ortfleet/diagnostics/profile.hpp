#pragma once
// `ortfleet profile`: one cold start of one session, broken into named phases with their share of the
// wall time, the top costs and what to do about each. Its phases are the start's own timeline phases,
// with the same boundaries (what `ortfleet start` shows), and the gap before the first of them named;
// session creation is split further into ONNX Runtime's steps, from its log (timestamped: graph
// transformers, partitioning, initializer upload). ONNX Runtime's profiler gives per-node times of the
// first and later inferences. On more than one GPU it also starts a fleet on them once and says what
// the driver's start cost it (driver_start.hpp).
#include <cstdint>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

#include "ortfleet/base/settings.hpp"
#include "ortfleet/diagnostics/driver_start.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/fleet/start_report.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/timeline.hpp"

namespace ortfleet {

/// One event of ONNX Runtime's profiler output (a Chrome trace array).
struct OrtProfileEvent {
  std::string category;  ///< "Session" or "Node"
  std::string name;      ///< "model_loading_uri", "session_initialization", "model_run", "<node>_kernel_time"
  int64_t ts_us = 0;
  int64_t dur_us = 0;
  std::string op;        ///< op type, for node events
  std::string provider;  ///< execution provider, for node events
};

/// ONNX Runtime's profile file, parsed. Throws ortfleet::Error naming what is malformed.
std::vector<OrtProfileEvent> parse_ort_profile(const std::string& text, const std::string& source);

/// One ONNX Runtime log message as `start --ort-log` records it.
struct OrtLogLine {
  int64_t t_ns = 0;
  int severity = 0;
  std::string message;
};
/// Parses the JSON lines of an --ort-log file. Throws ortfleet::Error naming the bad line.
std::vector<OrtLogLine> parse_ort_log(const std::string& text, const std::string& source);
/// Reads and parses an --ort-log file. Throws ortfleet::Error; one that cannot be read or parsed on a
/// full disk is said as the full disk (where, and what to do), not as a malformed log.
std::vector<OrtLogLine> read_ort_log(const std::string& path);
/// Reads and parses ONNX Runtime's profile file, as read_ort_log reads its log.
std::vector<OrtProfileEvent> read_ort_profile(const std::string& path);
/// The time each graph transformer took in the log's messages from `from_ns` to `to_ns` (its steps
/// summed), largest first: from "Applying graph transformer X on step N" to "GraphTransformer X modified".
std::vector<std::pair<std::string, double>> transformer_times(const std::vector<OrtLogLine>& log, int64_t from_ns, int64_t to_ns);

struct ProfilePhase {
  std::string name;     ///< stable id: the timeline's phase ("runtime.load", "session.create"), a step of one, or a gap ("tool.setup")
  std::string label;    ///< for people: "graph optimisation"
  double start_ms = 0;  ///< since exec, on the start's timeline (a timeline phase's own boundaries)
  double ms = 0;
  double share = 0;     ///< of the cold start's wall time
  std::string detail;
  std::string advice;   ///< what to do when this phase is a top cost
  /// "" for a phase of the start's timeline (or the gap before the first); the phase this one is a
  /// step of otherwise ("session.create" for ONNX Runtime's steps). Steps add up to their phase.
  std::string parent;
  /// Whether the user can change it (a flag, the model, a warm pool): only these are ranked as top costs.
  bool actionable = false;
};

struct NodeCost {
  std::string node;
  std::string op;
  std::string provider;
  double first_ms = 0;   ///< in the first inference (includes cuDNN algorithm search for convs)
  double steady_ms = 0;  ///< median over later inferences
};

/// What this machine does at best, measured beside the profiled start (0: not measured).
struct MachineSpeeds {
  double upload_gb_per_s = 0;  ///< host to GPU from pinned memory, in one large copy
  double read_gb_per_s = 0;    ///< the model's files read again (from the page cache): the CPU's weights term
  double cuda_init_ms = 0;     ///< cuInit, measured in ortfleet's own process after the start
  double cuda_context_ms = 0;  ///< one primary context, likewise
};

/// One term of the floor of a cold start, and what the profiled start spent on the same work.
struct FloorTerm {
  std::string name;        ///< "process", "runtime", "session", "inference"
  std::string label;
  double floor_ms = 0;
  double measured_ms = 0;
  std::string basis;       ///< how the floor term was computed, for people
  double ratio() const { return floor_ms > 0 ? measured_ms / floor_ms : 0; }
};

/// What a batch-size switch costs one ONNX Runtime session: the p50 of calls alternating batch 1 and 2,
/// the p50 of each batch alone (mean of the two) and the difference. Negative: not measured.
struct ShapeSwitchCost {
  double call_ms = -1;
  double steady_call_ms = -1;
  double cost_ms = -1;
  bool measured() const { return cost_ms >= 0; }
};

struct ProfileReport {
  std::string model;
  std::string device;
  RunConfig config;
  double wall_ms = 0;          ///< exec until the first inference finished
  double attributed_ms = 0;    ///< sum of the named phases
  std::vector<ProfilePhase> phases;  ///< in order of occurrence
  std::vector<std::pair<std::string, double>> transformers;  ///< graph transformer -> ms, largest first
  std::vector<NodeCost> nodes;       ///< largest first-run extra cost first
  int conv_nodes = 0;
  double conv_first_ms = 0;    ///< all conv nodes, first inference
  double conv_steady_ms = 0;   ///< all conv nodes, a later inference
  std::map<std::string, int> placement;      ///< execution provider -> nodes
  std::vector<std::string> cpu_fallback;     ///< ops of a GPU session that run on the CPU
  int memcpy_nodes = 0;
  uint64_t initializer_bytes = 0;
  double upload_gb_per_s = 0;
  double steady_p50_ms = 0;
  double steady_p99_ms = 0;
  /// The largest costs the user can change, steps rather than the phase they split: "graph optimisation:
  /// 1.21 s (45%) - <advice>".
  std::vector<std::string> top_costs;
  std::vector<std::string> dynamic_dims;  ///< the model's inputs' dims without a fixed size, "input[0] (batch)"
  std::string shapes_advice;              ///< what dynamic dims cost, and what to declare
  ShapeSwitchCost shape_switch;  ///< measured for a dynamic batch (ProfileOptions::shape_switch_seconds)
  Timeline timeline;                   ///< our phases and ONNX Runtime's, on one clock
  std::string ort_profile_path;  ///< ONNX Runtime's profile when its folder is kept (ProfileOptions::work_dir), else empty
  bool on_gpu = false;
  /// The floor of this start on this machine (add_floor): process start + max(EP load and
  /// registration, cuInit + context) + weights at the measured bandwidth + the first inference at
  /// its steady latency plus the conv search the chosen mode needs. Empty until add_floor().
  std::vector<FloorTerm> floor;
  double floor_ms = 0;
  MachineSpeeds speeds;
  /// On more than one GPU: one start of a fleet on them (ProfileOptions::fleet_devices) and what the
  /// driver's start (cuInit and a context per worker) cost it; `fleet_error` when it failed.
  DriverStart fleet_driver;
  std::string fleet_devices;
  std::string fleet_error;

  double attributed_share() const { return wall_ms > 0 ? attributed_ms / wall_ms : 0; }
  /// The phase named `name` ("runtime.load"), or null.
  const ProfilePhase* phase(const std::string& name) const;
  /// The measured start over its floor (0 without a floor).
  double floor_ratio() const { return floor_ms > 0 ? wall_ms / floor_ms : 0; }
  std::string to_json() const;
};

/// Builds the report from one start's outputs (separate from running it, for tests).
ProfileReport build_profile(const StartReport& start, const std::vector<OrtLogLine>& log,
                            const std::vector<OrtProfileEvent>& ort_profile, const ModelFacts& facts);

/// Computes report.floor from the report's phases and the machine's measured speeds.
void add_floor(ProfileReport& report, const MachineSpeeds& speeds);

/// Measures what add_floor needs on `device`: pinned host-to-device bandwidth, cuInit and a context
/// on a GPU; the read speed of `model`'s files (already in the page cache) on the CPU.
MachineSpeeds measure_machine_speeds(const Device& device, const std::string& model, uint64_t weight_bytes);

struct ProfileOptions {
  /// What steady_runs takes: the one check of --runs and of Python's runs=. The profiled start warms
  /// up 1 + runs times, and a start takes a warm-up of up to 10000.
  static constexpr ValueRule kSteadyRunsRule{.kind = ValueKind::whole, .lo = 1, .hi = 9999};
  std::string model;
  Device device = Device::cpu();
  RunConfig config;  ///< the profiled child start's (as a config file), and the shape-switch sessions'
  int steady_runs = 20;
  std::string ortfleet_executable;
  std::string ort_library;
  std::string work_dir;  ///< where the child writes its profile and log (default: a temporary folder)
  /// Seconds per stream for the shape-switch measurement of a model with a dynamic batch dim (three
  /// streams, in this process); 0 skips it.
  double shape_switch_seconds = 1;
  double timeout_s = 3600;
  /// Profiling a GPU of a machine with more than one: after the profiled start, one start of a fleet
  /// on every GPU, in a fresh process, for what the driver's start costs it (ProfileReport::fleet_driver).
  bool fleet = true;
  std::function<void(const std::string&)> progress;  ///< one status line at a time
  /// Ends the profile when requested (Ctrl-C in Python): its child start is stopped and run_profile throws.
  std::stop_token stop;
};

/// Measures a batch switch of `model` (streams of `seconds` each, in this process) on `device`; not
/// measured when the model's first input dim is fixed (`dynamic_dims` from inspect_model) or `seconds`
/// is 0. Throws ortfleet::Error.
ShapeSwitchCost measure_shape_switch(const std::string& model, const std::vector<std::string>& dynamic_dims, const Device& device,
                                     const RunConfig& config, double seconds, const std::string& ort_library);

/// Runs one cold start in a fresh process and builds the report.
ProfileReport run_profile(const ProfileOptions& options);

}  // namespace ortfleet
