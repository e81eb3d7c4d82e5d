#pragma once
// Options that shape a session's start-up and speed: ONNX Runtime session options and CUDA
// execution provider options as typed fields, mapped to ONNX Runtime's keys in one place
// (src/engine/core/options.cpp), and saved/loaded as the config file `tune` writes and `bench`,
// `Fleet` and the Python API read (src/engine/core/config_file.cpp).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ortfleet/engine/shape_grammar.hpp"

namespace ortfleet {

enum class ConvAlgoSearch { exhaustive, heuristic, default_algo };
enum class ArenaExtendStrategy { next_power_of_two, same_as_requested };
enum class GraphOptimization { disabled, basic, extended, layout, all };
/// How the optimised-model cache stores a graph: ONNX with its weights in a side file (mapped at load),
/// or ONNX Runtime's own ORT format (a FlatBuffer ONNX Runtime reads without protobuf parsing, its
/// kernels' type constraints resolved when it was saved; weights inside, so under 2 GB only).
/// How the model cache stores an optimised graph. automatic: the ORT format for graphs of many
/// nodes (kOrtFormatMinNodes or more), where it skips most of the parse and graph resolution, and for
/// graphs with control flow (If, Loop, Scan), whose ONNX-format save ONNX Runtime 1.29 cannot load back;
/// the ONNX format (weights mapped from a side file) for the rest, where re-laying out the weights from
/// an ORT file costs more (docs/why-startup-is-slow.md: the 24,000-node graph 0.65x, the 1.27 GB
/// transformer 6x). Graphs over 2 GB are always ONNX.
enum class ModelCacheFormat { automatic, onnx, ort };
inline constexpr int kOrtFormatMinNodes = 5000;
/// When a model's missing cache entry is made. background: the start loads the model as it is, as
/// ONNX Runtime alone would, and the entry is written, checked against the model and priced after
/// every device is ready, by a low-priority worker process (or the warm pool), so that only later
/// starts pay for it and profit; inline: during the start, before ready (what `ortfleet cache
/// prepare` does); off: entries are read, never written.
enum class ModelCacheFill { background, inline_start, off };

/// A tiered start (a model's first start on a GPU, with no cache entry): the job's first outputs come
/// from a session made quickly (cuDNN's cheapest convolution search: no heuristics to query, no
/// runtime-compiled plans), while the session as configured is made beside it and switched in between
/// two runs once its outputs agree with the quick one's (the full session's first run, cuDNN's search,
/// holds the job's calls once). automatic: a first start with the model cache on, for graphs of
/// kTieredStartMinConvs convolutions and more, where cuDNN's search is the start (a 2,000-convolution
/// graph, 1 x H100: first outputs in 6.3 s against 25.9 s plain); on: whenever the device holds both
/// sessions; off: never.
enum class TieredStart { automatic, on, off };
inline constexpr int kTieredStartMinConvs = 500;

struct CudaOptions {
  ConvAlgoSearch conv_algo_search = ConvAlgoSearch::exhaustive;  ///< ONNX Runtime's default
  bool conv_use_max_workspace = true;
  std::optional<uint64_t> gpu_mem_limit;        ///< bytes; none = no limit
  ArenaExtendStrategy arena_extend = ArenaExtendStrategy::next_power_of_two;
  bool cuda_graph = false;                      ///< capture the graph at the first run, replay after
  bool tf32 = true;
  bool copy_in_default_stream = true;
  bool prefer_nhwc = false;
  uintptr_t user_compute_stream = 0;            ///< a cudaStream_t to run on, 0 = the EP's own
  std::map<std::string, std::string> extra;     ///< further provider keys, passed through verbatim

  /// The provider options as ONNX Runtime's string keys ("cudnn_conv_algo_search", ...).
  std::vector<std::pair<std::string, std::string>> provider_options() const;
  bool operator==(const CudaOptions&) const = default;
};

/// ONNX Runtime 1.29's session config entries that assign nodes to execution providers: by node name
/// ("cpu(name, name, ...)", what `doctor --locate-crash` writes as a work-around) and by the nodes'
/// layer annotations.
inline constexpr const char* kNodeAssignmentByName = "session.name_based_layer_assignment";
inline constexpr const char* kNodeAssignmentByLayer = "session.layer_assignment_settings";

struct SessionOptions {
  GraphOptimization graph_optimization = GraphOptimization::all;
  bool memory_pattern = true;
  bool cpu_arena = true;
  int intra_op_threads = 0;       ///< 0 = ONNX Runtime's choice (one per physical core)
  int inter_op_threads = 0;
  bool thread_spinning = true;    ///< idle worker threads spin (fast for CPU inference, wasteful on GPU)
  /// Reuse a pre-optimised copy of the model (ortfleet/cache.hpp). Unset: the strategy decides (the
  /// fleet strategy uses it; the plain ones, which stand for what users run today, do not).
  std::optional<bool> optimized_model_cache;
  ModelCacheFormat model_cache_format = ModelCacheFormat::automatic;
  ModelCacheFill model_cache_fill = ModelCacheFill::background;
  TieredStart tiered_start = TieredStart::automatic;
  /// A read-only layer of the model cache looked in before the local one (a cluster file system, a
  /// container image's layer): its entries are checked like an imported bundle's and never written;
  /// new entries go to the local cache. "": $ORTFLEET_CACHE_SHARED, if set (ModelCache::shared_root).
  std::string model_cache_shared;
  std::string cuda_module_loading;     ///< "" (leave as is), "LAZY" or "EAGER": CUDA_MODULE_LOADING for the process
  /// CUDA_DEVICE_MAX_CONNECTIONS for the process (0: leave as is; the fleet strategy uses 1). Each
  /// connection is a hardware queue set up with the context: 1 made an H100's context 2x cheaper to
  /// create than the default 8, and a session runs on one stream anyway.
  int cuda_max_connections = 0;
  std::map<std::string, std::string> config_entries;  ///< AddConfigEntry pass-through
  /// Shared libraries of custom operators (RegisterCustomOpsLibrary), for models with ops of their own.
  std::vector<std::string> custom_op_libraries;
  bool operator==(const SessionOptions&) const = default;
  /// Whether config_entries assign nodes to execution providers (kNodeAssignmentBy*).
  bool assigns_nodes() const { return config_entries.count(kNodeAssignmentByName) > 0 || config_entries.count(kNodeAssignmentByLayer) > 0; }
};

/// The most ONNX Runtime sessions one device may keep for one model (shapes.max_sessions).
inline constexpr int kMaxShapeSessions = 256;

/// What a call of a shape nothing was declared for runs on.
enum class ShapePolicy {
  /// One session serves new shapes, as ONNX Runtime alone does. On a GPU, a shape gets a session of
  /// its own once the shape switches it caused in the shared session have cost what a new session
  /// costs, both measured at the model's first start (kept with its cache entry); never on the CPU.
  measured,
  per_shape,  ///< a session per new shape, up to max_sessions, least recently used evicted
  shared,     ///< one session for every shape nothing was declared for
};

/// The input shapes a session serves. ONNX Runtime 1.29's CUDA EP rebuilds every convolution's cuDNN
/// plan whenever a call's shape differs from the previous call's, so a session may keep one ONNX
/// Runtime session per shape signature (ortfleet/engine/session.hpp).
struct ShapeOptions {
  std::vector<InputShapes> declared;  ///< made and warmed up at start-up; inputs left out take the model's dims
  std::vector<int64_t> batches;       ///< shorthand: these sizes of the first dim of every input that has it dynamic
  /// ONNX Runtime sessions per device at most (least recently used evicted); 1 serves every shape
  /// from one session, as ONNX Runtime alone does.
  int max_sessions = 8;
  /// A call whose batch is not declared runs padded to the next declared batch, its outputs sliced
  /// back: a fixed number of sessions, whatever the batches.
  bool pad_batch = false;
  /// On a GPU, the sessions made for further shapes use one copy of the weights, uploaded once
  /// (from the optimised-model cache's entry, whose graph is final), instead of a copy each.
  bool share_weights = true;
  /// Dims padded up to the next of a few sizes, outputs cropped back: a session per bucket shape (the
  /// cross product of every dim's sizes), made and warmed up at start-up.
  std::vector<DimBuckets> buckets;
  /// The value an input is padded with (a token id for input_ids); 0 for inputs not named.
  std::map<std::string, double> pad_values;
  ShapePolicy policy = ShapePolicy::measured;
  bool operator==(const ShapeOptions&) const = default;
  /// Throws ortfleet::Error when the options contradict each other (padding with no batch to pad to,
  /// a session count out of 1..kMaxShapeSessions).
  void validate() const;
};

/// Refuses, before any session is made, shapes the model at `model` cannot take: a declared shape or
/// bucket naming no input of it, a bucket on a dim the model fixes, batches without a dynamic first
/// dim, more bucket shapes than a device keeps. Reads the inputs from the model's file (no ONNX
/// Runtime), so that a command refuses them before any work; throws the ortfleet::Error a session
/// would throw at start-up.
void check_shapes_against_model(const ShapeOptions& shapes, const std::string& model);

/// "input_ids=0" -> {"input_ids", 0}. Throws ortfleet::Error.
std::pair<std::string, double> parse_pad_value(const std::string& text);
const char* to_string(ShapePolicy policy);
ShapePolicy parse_shape_policy(const std::string& text);  ///< "measured", "per-shape", "shared"

/// The values a generated warm-up input takes: every element in [lo, hi] (lo == hi: that constant).
struct ValueRange {
  double lo = 0;
  double hi = 0;
  bool operator==(const ValueRange&) const = default;
};

/// The inputs warm-up feeds a model. Real models check their inputs (a sample rate, a recurrent
/// state, token ids, a length the model pads by reflection): made-up values fail their first run.
struct WarmupOptions {
  /// A `.npz` file (an array per input name) or, for a one-input model, a `.npy` file: these values
  /// and shapes are fed as they are; inputs the file lacks are generated.
  std::string inputs_file;
  /// How messages name where those arrays came from when it is not a file the user named: a front end
  /// that wrote them into inputs_file itself says what the user gave ("the warmup_inputs dict").
  /// Not part of a config file.
  std::string inputs_origin;
  /// Ranges of generated inputs by name ("sr" -> 16000..16000); others take [-1, 1) (floats), {0, 1}
  /// (integers), or the range the model's metadata records (ortfleet.input_range.NAME).
  std::map<std::string, ValueRange> input_ranges;
  bool operator==(const WarmupOptions&) const = default;
};

/// "sr=16000" -> {"sr", 16000..16000}; "ids=0:30521" -> {"ids", 0..30521}. Throws ortfleet::Error.
std::pair<std::string, ValueRange> parse_input_range(const std::string& text);

/// The warm pool a start leaves behind on its node (ortfleet/fleet/fleet.hpp, FleetOptions::auto_pool).
struct WarmPoolOptions {
  /// Seconds the pool waits with nobody attached before it exits; 0 leaves no pool. Unset: the
  /// environment's ORTFLEET_WARM_POOL_IDLE, else the pool's default: kDefaultParkedIdleExitS where its
  /// workers park (an idle pool then holds host memory only), kDefaultIdleExitS where they cannot.
  std::optional<double> idle_exit_s;
  static constexpr double kDefaultIdleExitS = 300;
  static constexpr double kDefaultParkedIdleExitS = 1800;
  /// idle_exit_s, else ORTFLEET_WARM_POOL_IDLE (seconds), else nothing (the pool's default,
  /// default_idle_exit_s). Throws ortfleet::Error for a variable that is not a number of seconds.
  std::optional<double> chosen_idle_exit_s() const;
  /// The pool's idle time when nothing says one: longer where its workers park.
  static double default_idle_exit_s(bool workers_park);
  /// Seconds with nobody attached after which the pool's GPU workers park (their GPU memory released
  /// by the driver's checkpoint, restored on the next job's request); 0: never. Unset: the
  /// environment's ORTFLEET_WARM_POOL_PARK, else kDefaultParkAfterS.
  std::optional<double> park_after_s;
  static constexpr double kDefaultParkAfterS = 30;
  double resolved_park_after_s() const;
  /// Models a node daemon (`ortfleet serve --config FILE`) makes resident, and parks, as it starts.
  std::vector<std::string> preload;
  bool operator==(const WarmPoolOptions&) const = default;
};

/// Everything that configures one session; what the config file holds.
struct RunConfig {
  std::string name;  ///< a label, e.g. "start-fast"
  SessionOptions session;
  CudaOptions cuda;
  /// Execution providers stacked in front of each device's own, by name, each with its options (ONNX
  /// Runtime's keys, checked by the provider itself): a provider named here is attached before the
  /// device's own on every device of the kind it runs on (TensorRT in front of CUDA). Empty, as in this
  /// build, which has no such provider: each device's own alone (src/engine/providers).
  std::map<std::string, std::map<std::string, std::string>> providers;
  ShapeOptions shapes;
  WarmupOptions warmup;
  WarmPoolOptions warm_pool;
  bool operator==(const RunConfig&) const = default;

  std::string to_json() const;
  /// Parses a config file's text; `source` names it in errors. Unknown keys, wrong types and bad
  /// values are errors that say which key and what is allowed.
  static RunConfig from_json(const std::string& text, const std::string& source);
  static RunConfig load(const std::string& path);
  void save(const std::string& path) const;
  /// One line for tables: "conv=HEURISTIC opt=all threads=1 ...", only the fields that differ from default.
  std::string summary() const;
};

/// Refuses, before any session or worker is made, every setting of `config` that the model at `model`
/// contradicts, with the ortfleet::Error a session would throw at start-up (naming the input and the
/// fix): declared shapes, batches and buckets (check_shapes_against_model), inputs that share a
/// symbolic dim given different sizes, the warm-up inputs (each array's name, element type, rank,
/// fixed and shared dims) and the input ranges (names, and bounds of the input's type); and that each
/// custom-op library is a readable shared library. Reads the model's file (no ONNX Runtime), and only
/// when one of those settings is given. The command line and the Python module call it before they
/// start anything.
void check_config_against_model(const RunConfig& config, const std::string& model);

/// Whether `device_error` (a device's one-line error from a start) refuses a setting the model
/// contradicts that only running it shows: buckets whose padding changes its outputs, or whose
/// outputs cannot be cropped back ("buckets for x.1 refused: ..."). The command line exits 2 for
/// it, as for a setting refused before any work.
bool refuses_buckets(const std::string& device_error);

/// What is wrong with `value` for ONNX Runtime's session config entry `key`, or "" when nothing is:
/// its on/off entries (session.disable_prepacking, ...) take "0" or "1" and read any other value as
/// off; its counts take a whole number. Keys it does not know are left to ONNX Runtime.
std::string session_config_entry_problem(const std::string& key, const std::string& value);

std::string to_string(ConvAlgoSearch v);
std::string to_string(GraphOptimization v);
std::string to_string(ArenaExtendStrategy v);
std::string to_string(ModelCacheFormat v);
ModelCacheFormat parse_model_cache_format(const std::string& s);
std::string to_string(ModelCacheFill v);
std::string to_string(TieredStart v);
ModelCacheFill parse_model_cache_fill(const std::string& s);
TieredStart parse_tiered_start(const std::string& s);  ///< "auto", "on", "off"
ConvAlgoSearch parse_conv_algo_search(const std::string& s);
GraphOptimization parse_graph_optimization(const std::string& s);

}  // namespace ortfleet
