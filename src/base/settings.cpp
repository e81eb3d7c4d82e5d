// The one table of settings (ortfleet/base/settings.hpp) and the one check of their values.
#include "ortfleet/base/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <thread>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"

namespace ortfleet {

namespace {

constexpr ValueRule on_off() { return {.kind = ValueKind::on_off}; }
constexpr ValueRule whole(double lo, double hi, const char* unit = "") { return {.kind = ValueKind::whole, .lo = lo, .hi = hi, .unit = unit}; }
constexpr ValueRule seconds(double lo = 0, double hi = kWeekS) { return {.kind = ValueKind::number, .lo = lo, .hi = hi, .unit = "seconds"}; }
/// A time limit: more than 0 seconds, at most a week.
constexpr ValueRule time_limit() { return {.kind = ValueKind::number, .lo = 0, .hi = kWeekS, .unit = "seconds", .above_lo = true}; }
constexpr ValueRule choice(const char* words) { return {.kind = ValueKind::choice, .words = words}; }
constexpr ValueRule path(const char* alternatives = "") { return {.kind = ValueKind::path, .words = alternatives}; }
constexpr ValueRule absolute_path() { return {.kind = ValueKind::path, .absolute = true}; }
constexpr ValueRule text() { return {.kind = ValueKind::text}; }
constexpr ValueRule word_list(const char* words) { return {.kind = ValueKind::word_list, .words = words}; }
constexpr ValueRule threads() { return {.kind = ValueKind::whole, .lo = 0, .hi = 64, .hi_per_core = 4}; }

using S = Setting;
using Scope = SettingScope;
constexpr auto warn = BadVariable::warn;

// In Setting's order (checked below). Flags and keywords are the command line's and the Python module's
// names as they were before this table: keep them, for scripts use them.
constexpr std::array<SettingRow, kSettingCount> kRows = {{
    {S::model, "model", Scope::fleet, nullptr, "model", path(), "", "The .onnx model"},
    {S::devices, "devices", Scope::fleet, "--devices", "devices", text(), "all",
     "Devices: all (every GPU, else the CPU), 0,1,2, 0-3, cuda:0, cpu, cpu*4", BadVariable::refuse, "object", nullptr,
     "None (every GPU, else the CPU), a string as on the command line (\"all\", \"0,1\", \"cpu*2\"), or a list of GPU ordinals and device names"},
    {S::strategy, "strategy", Scope::fleet, "--strategy", "strategy", choice("sequential, threads, processes, fleet, auto"), "auto",
     "How the sessions start: sequential, threads, processes, fleet or auto", BadVariable::refuse, "str", "'auto'"},
    {S::config, "config", Scope::fleet, "--config", "config", path(), "",
     "A config file (from 'ortfleet tune --write-config')", BadVariable::refuse, "object", nullptr,
     "None (the defaults), a config file's path, or a dict in its shape"},
    {S::warmup_runs, "warmup_runs", Scope::fleet, "--warmup", "warmup", whole(0, 10000), "1",
     "Warm-up inferences per device before it counts as ready", BadVariable::refuse, "int", "1"},
    {S::start_timeout, "start_timeout_s", Scope::fleet, "--timeout", "start_timeout", time_limit(), "7200",
     "Seconds a device may take to become ready; a worker that has not answered by then is killed and its device fails",
     BadVariable::refuse, "float", "7200.0"},
    {S::run_timeout, "run_timeout_s", Scope::fleet, nullptr, "run_timeout", time_limit(), "600",
     "Seconds one run may take on a worker; a worker that has not answered by then is killed and its device fails", BadVariable::refuse,
     "float", "600.0"},
    {S::ort_library, "ort_library", Scope::fleet, "--ort-lib", "ort_library", path(), "",
     "libonnxruntime.so to use (else $ORTFLEET_ORT_LIB, the copy beside ortfleet, the fetched copy, Python packages, the system's)",
     BadVariable::refuse, "str", "''"},
    {S::profile_dir, "profile_dir", Scope::fleet, "--profile-dir", "profile_dir", path(), "",
     "Write ONNX Runtime's own profile per device here", BadVariable::refuse, "str", "''"},
    {S::pool, "pool", Scope::fleet, "--pool", "pool", text(), "",
     "The warm pool to start on: the socket of `ortfleet serve` ('default': the node's), or in Python an ortfleet.Pool; Python's "
     "None: the pool ortfleet.prewarm() started when it has every device, else the node's; False: no pool at all",
     BadVariable::refuse, "object", nullptr,
     "An ortfleet.Pool, or the socket path of an `ortfleet serve` daemon, to start on warm workers (None: the pool ortfleet.prewarm() started, when it has every device, else the warm pool on this node's default socket, or one this start leaves there; False: no pool at all)"},
    {S::narrow_workers, "narrow_workers", Scope::fleet, "--no-narrow-workers", "narrow_workers", on_off(), "true",
     "Worker processes see only their own GPU (CUDA_VISIBLE_DEVICES); the flag lets them see every GPU", BadVariable::refuse, "bool", "True",
     "True: worker processes see only their own GPU (CUDA_VISIBLE_DEVICES); False: every GPU"},
    {S::one_process, "one_process", Scope::fleet, "--one-process", "one_process", on_off(), "false",
     "With the fleet on several GPUs: every session in this process, no worker processes", BadVariable::refuse, "bool", "False"},
    {S::auto_pool, "auto_pool", Scope::fleet, nullptr, nullptr, on_off(), "1",
     "0: the automatic strategy neither starts on a pool nor leaves one"},
    {S::request_ring, "request_ring", Scope::fleet, nullptr, nullptr, on_off(), "1",
     "0: runs on worker processes go through the socket (a message and a memfd per run) instead of the request ring", warn},
    {S::worker_executable, "worker_executable", Scope::fleet, nullptr, nullptr, path(), "",
     "The ortfleet-worker executable (else the one beside this binary)"},

    {S::graph_optimization, "session.graph_optimization", Scope::config, "--graph-opt", nullptr,
     choice("disabled, basic, extended, layout, all"), "all", "Graph optimisation level: disabled, basic, extended, layout, all"},
    {S::memory_pattern, "session.memory_pattern", Scope::config, nullptr, nullptr, on_off(), "true", "ONNX Runtime's memory pattern optimisation"},
    {S::cpu_arena, "session.cpu_arena", Scope::config, nullptr, nullptr, on_off(), "true", "ONNX Runtime's CPU memory arena"},
    {S::intra_threads, "session.intra_op_threads", Scope::config, "--intra-threads", nullptr, threads(), "0",
     "Intra-op threads per session (0 = ONNX Runtime's choice)"},
    {S::inter_threads, "session.inter_op_threads", Scope::config, "--inter-threads", nullptr, threads(), "0", "Inter-op threads per session"},
    {S::thread_spinning, "session.thread_spinning", Scope::config, nullptr, nullptr, on_off(), "true",
     "Idle worker threads spin: fast for CPU inference, wasteful on a GPU"},
    {S::model_cache, "session.optimized_model_cache", Scope::config, "--model-cache", nullptr, on_off(), "",
     "Use the cache of pre-optimised models"},
    {S::model_cache_format, "session.model_cache_format", Scope::config, "--model-cache-format", nullptr, choice("auto, onnx, ort"), "auto",
     "How the model cache stores a graph: auto (ort for graphs of 5,000 nodes or more, else onnx), onnx (weights mapped from a side "
     "file) or ort (ONNX Runtime's ORT format)"},
    {S::model_cache_fill, "session.model_cache_fill", Scope::config, "--model-cache-fill", "model_cache_fill",
     choice("background, inline, off"), "background",
     "When a missing cache entry is made: background (after every device is ready, by a low-priority worker, so the start is a plain "
     "one), inline (during the start) or off (entries are only read)"},
    {S::tiered_start, "session.tiered_start", Scope::config, "--tiered-start", "tiered_start", choice("auto, on, off"), "auto",
     "A model's first start gives its first outputs from a session made quickly (on a GPU cuDNN's cheapest convolution search, on "
     "the CPU basic graph optimisation) while the session as configured is made beside it, switched in once their outputs agree: "
     "auto (a first start with the model cache on, on a GPU, graphs of 500 convolutions and more), on or off"},
    {S::model_cache_shared, "session.model_cache_shared", Scope::config, "--model-cache-shared", nullptr, absolute_path(), "",
     "A read-only layer of the model cache looked in before the local one (a cluster file system, an image layer; entries checked, "
     "never written; default $ORTFLEET_CACHE_SHARED)"},
    {S::module_loading, "session.cuda_module_loading", Scope::config, "--module-loading", nullptr, choice("LAZY, EAGER"), "",
     "CUDA_MODULE_LOADING for the sessions' process: LAZY or EAGER"},
    {S::max_connections, "session.cuda_max_connections", Scope::config, nullptr, nullptr, whole(0, 32), "0",
     "CUDA_DEVICE_MAX_CONNECTIONS for the process; 0 leaves it as is"},
    {S::session_config, "session.config_entries", Scope::config, "--session-config", nullptr, text(), "",
     "An ONNX Runtime session config entry KEY=VALUE, e.g. session.disable_prepacking=1 (repeatable)"},
    {S::custom_ops, "session.custom_op_libraries", Scope::config, "--custom-ops", nullptr, path(), "",
     "A shared library of custom operators the model uses (repeatable)"},

    {S::conv_algo, "cuda.conv_algo_search", Scope::config, "--conv-algo", nullptr, choice("EXHAUSTIVE, HEURISTIC, DEFAULT"), "EXHAUSTIVE",
     "cuDNN conv algorithm search: EXHAUSTIVE, HEURISTIC or DEFAULT"},
    {S::conv_max_workspace, "cuda.conv_use_max_workspace", Scope::config, nullptr, nullptr, on_off(), "true", "cudnn_conv_use_max_workspace"},
    {S::gpu_mem_limit, "cuda.gpu_mem_limit", Scope::config, nullptr, nullptr, whole(1, 1e15, "bytes"), "", "gpu_mem_limit: bytes, none for no limit"},
    {S::arena_extend, "cuda.arena_extend_strategy", Scope::config, nullptr, nullptr, choice("next_power_of_two, same_as_requested"),
     "next_power_of_two", "arena_extend_strategy"},
    {S::cuda_graph, "cuda.cuda_graph", Scope::config, "--cuda-graph", nullptr, on_off(), "false", "Enable CUDA graph capture in the CUDA EP"},
    {S::tf32, "cuda.tf32", Scope::config, nullptr, nullptr, on_off(), "true", "use_tf32"},
    {S::copy_in_default_stream, "cuda.copy_in_default_stream", Scope::config, nullptr, nullptr, on_off(), "true", "do_copy_in_default_stream"},
    {S::prefer_nhwc, "cuda.prefer_nhwc", Scope::config, nullptr, nullptr, on_off(), "false", "prefer_nhwc"},
    {S::cuda_extra, "cuda.extra", Scope::config, nullptr, nullptr, text(), "", "Further CUDA EP keys, passed through verbatim"},

    {S::shapes, "shapes.declared", Scope::config, "--shapes", "shapes", text(), "",
     "Input shapes to make and warm up at start-up, each with an ONNX Runtime session of its own: input=1x3x224x224,input=8x3x224x224, "
     "or a=1x128,b=1x128 for several inputs", BadVariable::refuse, nullptr, nullptr,
     "Input shapes made and warmed up at start-up, each with an ONNX Runtime session of its own: [\"input=8x3x224x224\"] or [{\"input\": (8, 3, 224, 224)}]"},
    {S::batches, "shapes.batches", Scope::config, "--batches", "batches", text(), "",
     "Batch sizes to make and warm up at start-up, for a model whose first dim is dynamic: 1,2,4,8", BadVariable::refuse, nullptr, nullptr,
     "Batch sizes made and warmed up at start-up, for a model whose first dim is dynamic: [1, 2, 4, 8] or \"1,2,4,8\""},
    {S::max_shape_sessions, "shapes.max_sessions", Scope::config, "--max-shape-sessions", "max_shape_sessions", whole(1, 256), "8",
     "ONNX Runtime sessions per device at most, one per input shape (1: one session for every shape)"},
    {S::pad_batch, "shapes.pad_batch", Scope::config, "--pad-batch", "pad_batch", on_off(), "false",
     "Pad a batch up to the next declared batch (`shapes.batches`), outputs sliced back"},
    {S::share_weights, "shapes.share_weights", Scope::config, nullptr, nullptr, on_off(), "true",
     "On a GPU, the sessions of further shapes use one copy of the weights"},
    {S::buckets, "shapes.buckets", Scope::config, "--buckets", "buckets", text(), "",
     "Pad a dynamic dim up to the next of a few sizes, outputs cropped back: input.dim=480,640,960 or a range input.dim=320:960:128 "
     "(first:last:step); dims sharing its symbolic name pad with it; repeatable, a session per combination, made at start-up", BadVariable::refuse, nullptr, nullptr,
     "Dims padded up to a few sizes, outputs cropped back: {'x.2': [480, 640, 960], 'x.3': '320:960:128'}"},
    {S::pad_value, "shapes.pad_values", Scope::config, "--pad-value", "pad_values", text(), "0",
     "The value an input is padded with: input_ids=0 (0 for inputs not named); repeatable", BadVariable::refuse, nullptr, nullptr,
     "The value each input is padded with: {'input_ids': 0}; 0 for inputs not named"},
    {S::shape_policy, "shapes.policy", Scope::config, "--shape-policy", "shape_policy", choice("measured, per-shape, shared"), "measured",
     "What serves a shape nothing was declared for: measured (one shared session; on a GPU a shape gets its own once its switches cost a "
     "new session, both priced when they first happen), per-shape (a session per shape, least recently used evicted) or shared"},

    {S::warmup_inputs, "warmup.inputs", Scope::config, "--warmup-inputs", "warmup_inputs", path(), "",
     "Real inputs for warm-up: a .npz file (numpy.savez(FILE, input_name=array, ...)), or a .npy file for a one-input model; their "
     "shapes are the ones warmed up when no `shapes.declared` are given",
     BadVariable::refuse, "object", nullptr,
     "Real inputs for warm-up (and for checking the model cache's entry): a dict of input name -> numpy array, or the path of a "
     ".npz/.npy file; their shapes are the ones warmed up when no `shapes.declared` are given"},
    {S::input_range, "warmup.input_ranges", Scope::config, "--input-range", "input_ranges", text(), "",
     "Values of a generated warm-up input: NAME=VALUE (a constant, e.g. sr=16000) or NAME=LO:HI (e.g. input_ids=0:30521); repeatable", BadVariable::refuse, nullptr, nullptr,
     "Values of generated warm-up inputs: a dict of input name -> value or (lo, hi), e.g. {'sr': 16000}"},

    {S::warm_pool_idle, "warm_pool.idle_exit_s", Scope::config, "--warm-pool-idle", "warm_pool_idle", seconds(), "",
     "Seconds the warm pool a start (`strategy=auto`) leaves on this node waits idle before it exits; 0 leaves none (default 1800 "
     "where its workers park, else 300; or ORTFLEET_WARM_POOL_IDLE)"},
    {S::warm_pool_park, "warm_pool.park_after_s", Scope::config, "--warm-pool-park", "warm_pool_park", seconds(), "30",
     "Seconds after which the warm pool a start leaves parks its GPU workers (their GPU memory released by the driver, restored on the "
     "next job's request); 0: never (default 30, or ORTFLEET_WARM_POOL_PARK)"},
    {S::warm_pool_preload, "warm_pool.preload", Scope::config, nullptr, nullptr, path(), "",
     "Models a node daemon (`ortfleet serve --config FILE`) makes resident, and parks, as it starts, before any job asks: a list of paths"},

    {S::socket, "socket_path", Scope::serve, "--socket", "socket", path(), "", "The Unix socket of the pool server"},
    {S::idle_exit, "idle_exit_s", Scope::serve, "--idle-exit", nullptr, seconds(), "0",
     "Exit after this many seconds with no job attached and nothing in the making (0: never; the pool a start leaves behind uses "
     "`warm_pool.idle_exit_s`)"},
    {S::park_after, "park_after_s", Scope::serve, "--park-after", nullptr, seconds(), "30",
     "Park the GPU workers after this many seconds with no job attached: the driver moves their GPU state into host memory (no GPU "
     "memory held) and restores it on the next job's request, sessions intact (NVIDIA driver r570+; 0: never)"},
    {S::max_resident, "max_resident_sessions", Scope::serve, "--max-resident", "max_resident_sessions", whole(1, 100000), "64",
     "Sessions each worker keeps when no job holds them (least recently used go first)"},
    {S::preload, "preload_models", Scope::serve, "--preload", nullptr, path(), "",
     "A model to make resident on every device as the daemon starts, before any job asks (parked with the pool); repeatable"},
    {S::preload_cached, "preload_cached", Scope::serve, "--preload-cached", nullptr, on_off(), "false",
     "Also make resident the models this node's model cache has entries of (what `ortfleet cache import` brought), where their files are here"},
    {S::preload_budget, "preload_budget_gb", Scope::serve, "--preload-budget", nullptr,
     {.kind = ValueKind::number, .lo = 0, .hi = 1e6, .unit = "GB"}, "",
     "Host memory the models made resident at start may take in all (their weights, held in host memory while parked), least recently "
     "used left out first; 0: none (default: a quarter of this machine's memory)"},
    {S::remember_served, "remember_served", Scope::serve, "--no-remember", nullptr, on_off(), "true",
     "Remember the models this daemon serves (in its state folder) and make them resident again when it next starts; the flag does "
     "neither"},
    {S::unload_above, "unload_above_gb", Scope::serve, "--unload-above", nullptr, {.kind = ValueKind::number, .lo = 0, .hi = 1e6, .unit = "GB"},
     "2",
     "Before its worker parks, drop a session nobody holds, made from its model cache entry, whose model is larger than this many GB "
     "(uploading large weights again from the entry beats the driver's restore of them): made again from the entry when a job's client "
     "says it comes; 0: never"},

    {S::ort_log, "ort_log", Scope::output, "--ort-log", nullptr, path(), "",
     "Write ONNX Runtime's log (verbose, timestamped JSON lines) here (in-process strategies)"},
    {S::timeline, "timeline", Scope::output, "--timeline", nullptr, path(), "", "Write the timeline as JSON here"},

    {S::cache_root, "cache_root", Scope::environment, nullptr, nullptr, absolute_path(), "",
     "The folder of this user's ortfleet files (else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet)"},
    {S::ort_root, "ort_root", Scope::environment, nullptr, nullptr, path(), "", "A folder whose lib/ holds libonnxruntime.so"},
    {S::ort_log_level, "ort_log_level", Scope::environment, nullptr, nullptr, choice("verbose, info, warning, error, fatal"), "warning",
     "The level of ONNX Runtime's own messages that are printed", warn},
    {S::cuda_ep, "cuda_ep", Scope::environment, nullptr, nullptr, path(), "", "ONNX Runtime's CUDA EP library, or the folder holding it"},
    {S::cudnn_choices, "cudnn_choices", Scope::environment, nullptr, nullptr, {.kind = ValueKind::path, .words = "0", .absolute = true}, "",
     "The folder of cuDNN's record that GPU workers share; 0 keeps no record", warn},
    {S::park_trim, "park_trim", Scope::environment, nullptr, nullptr, word_list("arena, heap, stack, none"), "arena,heap,stack",
     "What a pool's worker hands back before it parks", warn},
    {S::ring_spin, "ring_spin_us", Scope::environment, nullptr, nullptr, whole(0, 1000000, "microseconds"), "",
     "How long a request ring's waiter polls before it sleeps", warn},
    {S::crash_handler, "crash_handler", Scope::environment, nullptr, nullptr, on_off(), "1",
     "0: no handler for fatal signals, and no crash scopes", warn},
    {S::web_dir, "web_dir", Scope::environment, nullptr, nullptr, path(), "", "The folder holding echarts.min.js"},
    {S::python_anchor, "python_anchor", Scope::environment, nullptr, nullptr, path(), "", "bench's Python anchor script"},

    {S::worker_log_level, "worker_log_level", Scope::handed_down, nullptr, nullptr,
     choice("trace, debug, info, warning, error, critical, off"), "info", "A worker's log level", warn},
    {S::worker_background, "worker_background", Scope::handed_down, nullptr, nullptr, on_off(), "0",
     "1: a worker nobody waits for lowers its CPU and I/O priority", warn},
    {S::spawn_time, "spawn_ns", Scope::handed_down, nullptr, nullptr, whole(0, 1e18, "nanoseconds"), "",
     "When the parent spawned this process, on the monotonic clock", warn},
    {S::crash_fd, "crash_fd", Scope::handed_down, nullptr, nullptr, whole(0, 1048576), "",
     "The file descriptor a crash inside ONNX Runtime writes its line to", warn},

    {S::test_worker_start_delay, "test_worker_start_delay", Scope::tests, nullptr, nullptr,
     {.kind = ValueKind::assignment, .lo = 0, .hi = 3600, .unit = "seconds"}, "", "DEVICE=SECONDS: that worker sleeps before a start"},
    {S::test_worker_init_delay, "test_worker_init_delay", Scope::tests, nullptr, nullptr,
     {.kind = ValueKind::assignment, .lo = 0, .hi = 3600, .unit = "seconds"}, "", "DEVICE=SECONDS: that worker sleeps before it initialises"},
    {S::test_import_kill_at, "test_import_kill_at", Scope::tests, nullptr, nullptr, choice("staged, publishing"), "",
     "Where a cache import is killed"},
    {S::test_cudnn_device, "test_cudnn_device", Scope::tests, nullptr, nullptr, text(), "", "The GPU name of a stand-in cuDNN"},
    {S::test_tier_disagree, "test_tier_disagree", Scope::tests, nullptr, nullptr, on_off(), "", "A tiered start's full session is told its outputs differ"},
    {S::test_park_cpu, "test_park_cpu", Scope::tests, nullptr, nullptr, on_off(), "",
     "A pool's CPU workers park (stopped by SIGSTOP, continued on restore), as GPU workers park with the driver's checkpoint"},
}};

constexpr bool rows_in_order() {
  for (size_t i = 0; i < kRows.size(); ++i) {
    if (static_cast<size_t>(kRows[i].id) != i) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> value_words(const ValueRule& rule) {
  const char* words = rule.words;
  std::vector<std::string> out;
  std::string_view rest = words;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view word = rest.substr(0, comma);
    while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
    if (!word.empty()) out.emplace_back(word);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

namespace {

bool is_word(const ValueRule& rule, std::string_view text) {
  const auto words = value_words(rule);
  return std::find(words.begin(), words.end(), text) != words.end();
}

std::string unit_words(const ValueRule& rule) { return *rule.unit != 0 ? std::string(" of ") + rule.unit : ""; }

}  // namespace

std::span<const SettingRow> all_settings() {
  static_assert(rows_in_order(), "the settings table lists the settings in Setting's order, one row each");
  return kRows;
}

const SettingRow& setting_row(Setting s) { return kRows[static_cast<size_t>(s)]; }

const char* setting_name(Setting s) { return setting_row(s).name; }

std::optional<Setting> setting_named(std::string_view name) {
  for (const auto& row : kRows) {
    if (name == row.name) return row.id;
  }
  return std::nullopt;
}

std::optional<Setting> setting_of_flag(std::string_view flag) {
  for (const auto& row : kRows) {
    if (row.flag != nullptr && flag == row.flag) return row.id;
  }
  return std::nullopt;
}

std::optional<Setting> setting_of_keyword(std::string_view keyword) {
  for (const auto& row : kRows) {
    if (row.keyword != nullptr && keyword == row.keyword) return row.id;
  }
  return std::nullopt;
}

std::string named(Setting s) { return std::string("`") + setting_name(s) + "`"; }

std::string named(Setting s, const std::string& value) { return std::string("`") + setting_name(s) + "=" + value + "`"; }

std::string render_settings(const std::string& text, const SettingWords& words) {
  // Never destroyed: a stream that renders settings (the command line's and the worker's stderr) may
  // flush after static destructors ran, at exit (ThreadSanitizer saw the regex used after its free).
  static const std::regex& marker = *new std::regex("`([a-z_.]+)(=([^`]*))?`");
  std::string out;
  auto from = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), marker), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(from, m[0].first);
    from = m[0].second;
    const auto setting = setting_named(m[1].str());
    const std::optional<std::string> value = m[2].matched ? std::optional<std::string>(m[3].str()) : std::nullopt;
    const auto said = setting ? words(*setting, value) : std::nullopt;
    out += said ? *said : m[0].str();
  }
  out.append(from, text.cend());
  return out;
}

// --- the one check ------------------------------------------------------------------------------------

double highest_value(const ValueRule& rule) {
  if (rule.hi_per_core <= 0) return rule.hi;
  return std::max(rule.hi, rule.hi_per_core * static_cast<double>(std::thread::hardware_concurrency()));
}

std::string number_words(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value == std::floor(value) && std::fabs(value) < 9e18 ? fmt::format("{}", static_cast<long long>(value)) : fmt::format("{:g}", value);
}

std::string allowed_values(const ValueRule& rule) {
  switch (rule.kind) {
    case ValueKind::on_off: return "0 or 1";
    case ValueKind::whole:
    case ValueKind::number:
    case ValueKind::assignment: {
      std::string what = std::string(rule.kind == ValueKind::whole ? "a whole number" : "a number") + unit_words(rule);
      if (rule.above_lo) what += " above " + number_words(rule.lo) + " and at most " + number_words(rule.hi);
      else what += " from " + number_words(rule.lo) + " to " + number_words(rule.hi);
      if (rule.hi_per_core > 0) what += fmt::format(" (or {} per core of this machine, where that is more)", number_words(rule.hi_per_core));
      return rule.kind == ValueKind::assignment ? "NAME=" + what : what;
    }
    case ValueKind::choice: return std::string("one of ") + rule.words;
    case ValueKind::word_list: return std::string("a comma-separated list of ") + rule.words;
    case ValueKind::path: {
      std::string what = rule.absolute ? "an absolute path" : "a path";
      if (*rule.words != 0) what += std::string(" or ") + rule.words;
      return what;
    }
    case ValueKind::text: return "text";
  }
  return "text";
}

std::string number_problem(const ValueRule& rule, double value) {
  const bool whole_kind = rule.kind == ValueKind::whole;
  if (whole_kind && std::isfinite(value) && value != std::floor(value)) return "is not a whole number: give " + allowed_values(rule);
  const bool inside = (rule.above_lo ? value > rule.lo : value >= rule.lo) && value <= highest_value(rule);  // NaN: neither
  if (!inside) return "is out of range: give " + allowed_values(rule);
  return {};
}

std::string text_problem(const ValueRule& rule, std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return "holds a NUL byte, which no " + std::string(rule.kind == ValueKind::path ? "path" : "value") + " holds";
  switch (rule.kind) {
    case ValueKind::on_off:
      return text == "0" || text == "1" ? std::string() : "is not 0 or 1";
    case ValueKind::whole:
    case ValueKind::number: {
      const auto number = parse_decimal(text);  // "0x10" is refused, not read as 16
      if (!number) return "is not a number: give " + allowed_values(rule);
      const bool digits = text.find_first_not_of("0123456789", text[0] == '-' || text[0] == '+' ? 1 : 0) == std::string_view::npos;
      if (rule.kind == ValueKind::whole && !digits) return "is not a whole number: give " + allowed_values(rule);
      return number_problem(rule, *number);
    }
    case ValueKind::assignment: {
      const size_t equals = text.rfind('=');
      if (equals == std::string_view::npos || equals == 0) return "is not NAME=NUMBER: give " + allowed_values(rule);
      const auto number = parse_decimal(text.substr(equals + 1));
      if (!number) return "is not NAME=NUMBER: give " + allowed_values(rule);
      return number_problem(rule, *number);
    }
    case ValueKind::choice:
      return is_word(rule, text) ? std::string() : "is not " + allowed_values(rule);
    case ValueKind::word_list: {
      std::string_view rest = text;
      while (true) {
        const size_t comma = rest.find(',');
        if (!is_word(rule, rest.substr(0, comma))) return "is not " + allowed_values(rule);
        if (comma == std::string_view::npos) return {};
        rest = rest.substr(comma + 1);
      }
    }
    case ValueKind::path:
      if (is_word(rule, text)) return {};
      if (text.empty()) return "is empty: give " + allowed_values(rule);
      if (rule.absolute && text.front() != '/') return "is a relative path: give " + allowed_values(rule);
      return {};
    case ValueKind::text:
      return {};
  }
  return {};
}

double checked_number(Setting s, double value) {
  const SettingRow& row = setting_row(s);
  if (const std::string problem = number_problem(row.values, value); !problem.empty()) {
    throw Error(named(s, number_words(value)) + " " + problem);
  }
  return value;
}

const std::string& checked_text(Setting s, const std::string& text) {
  const SettingRow& row = setting_row(s);
  if (const std::string problem = text_problem(row.values, text); !problem.empty()) {
    std::string shown = text;
    for (char& c : shown) {
      if (c == '\0') c = '?';
    }
    throw Error(named(s, shown) + " " + problem);
  }
  return text;
}

}  // namespace ortfleet
