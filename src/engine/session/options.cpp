#include "ortfleet/engine/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <type_traits>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/base/number_text.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

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

std::string session_config_entry_problem(const std::string& key, const std::string& value) {
  // From onnxruntime_session_options_config_keys.h (1.29): the entries ONNX Runtime compares with "1".
  static const std::set<std::string> kOnOff = {
      "session.disable_prepacking", "session.use_env_allocators", "session.set_denormal_as_zero", "session.disable_quant_qdq",
      "session.disable_qdq_constant_folding", "session.disable_double_qdq_remover", "session.enable_quant_qdq_cleanup",
      "optimization.enable_gelu_approximation", "optimization.enable_cast_chain_elimination", "session.disable_aot_function_inlining",
      "session.use_device_allocator_for_initializers", "session.inter_op.allow_spinning", "session.intra_op.allow_spinning",
      "session.use_ort_model_bytes_directly", "session.use_ort_model_bytes_for_initializers", "session.use_memory_mapped_ort_model",
      "session.qdqisint8allowed", "session.force_spinning_stop", "session.strict_shape_type_inference",
      "session.allow_released_opsets_only", "session.debug_layout_transformation", "session.disable_cpu_ep_fallback",
      "session.save_external_prepacked_constant_initializers", "ep.context_enable", "ep.context_embed_mode", "ep.share_ep_contexts",
      "ep.stop_share_ep_contexts", "session.compile_only", "mlas.enable_gemm_fastmath_arm64_bfloat16", "mlas.use_lut_gemm",
      "mlas.disable_kleidiai", "session.enable_dq_matmulnbits_fusion", "session.disable_model_compile",
      "session.fail_on_suboptimal_compiled_model"};
  // ... and those it reads as a whole number.
  static const std::set<std::string> kCounts = {
      "session.intra_op.spin_duration_us", "session.inter_op.spin_duration_us", "session.intra_op.spin_backoff_max",
      "session.inter_op.spin_backoff_max", "session.dynamic_block_base", "session.graph_optimizations_loop_level",
      "optimization.constant_folding_max_output_size_in_bytes", "session.qdq_matmulnbits_accuracy_level",
      "session.qdq_matmulnbits_block_size", "mlas.kleidiai.conv_igemm_max_work"};
  if (kOnOff.count(key) != 0 && value != "0" && value != "1") {
    return "must be \"0\" or \"1\" (got \"" + value + "\"): ONNX Runtime reads any other value as \"0\"";
  }
  if (kCounts.count(key) != 0 && (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)) {
    return "must be a whole number of 0 or more (got \"" + value + "\")";
  }
  return {};
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

double WarmPoolOptions::resolved_idle_exit_s() const {
  if (idle_exit_s) return *idle_exit_s;
  const char* env = std::getenv("ORTFLEET_WARM_POOL_IDLE");
  if (env == nullptr || *env == '\0') return kDefaultIdleExitS;
  const auto seconds = parse_decimal(env);
  if (!seconds || *seconds < 0 || *seconds > 7 * 24 * 3600) {
    throw Error(std::string("ORTFLEET_WARM_POOL_IDLE='") + env + "' is not a number of seconds from 0 to 604800",
                "Set it to the seconds a warm pool waits idle before it exits (e.g. 300), or 0 to leave no pool");
  }
  return *seconds;
}

std::vector<std::pair<std::string, std::string>> CudaOptions::provider_options() const {
  // The single mapping from our typed fields to the CUDA EP's option keys.
  std::vector<std::pair<std::string, std::string>> out = {
      {"cudnn_conv_algo_search", to_string(conv_algo_search)},
      {"cudnn_conv_use_max_workspace", conv_use_max_workspace ? "1" : "0"},
      {"arena_extend_strategy", to_string(arena_extend)},
      {"enable_cuda_graph", cuda_graph ? "1" : "0"},
      {"use_tf32", tf32 ? "1" : "0"},
      {"do_copy_in_default_stream", copy_in_default_stream ? "1" : "0"},
      {"prefer_nhwc", prefer_nhwc ? "1" : "0"},
  };
  if (gpu_mem_limit) out.emplace_back("gpu_mem_limit", std::to_string(*gpu_mem_limit));
  if (user_compute_stream != 0) {
    out.emplace_back("has_user_compute_stream", "1");
    out.emplace_back("user_compute_stream", std::to_string(user_compute_stream));
  }
  for (const auto& [k, v] : extra) {
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == k; });
    if (same != out.end()) same->second = v;
    else out.emplace_back(k, v);
  }
  return out;
}

// --- shapes --------------------------------------------------------------------------------------

// The grammar of shapes and sizes (parse_shape_list, parse_buckets, ...) is src/engine/shapes/shape_grammar.cpp.

std::pair<std::string, double> parse_pad_value(const std::string& text) {
  constexpr const char* kHint = "Write it as input=value: --pad-value input_ids=0";
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) throw Error("'" + text + "' is not input=value", kHint);
  const std::string number = text.substr(eq + 1);
  const auto value = parse_decimal(number);
  if (!value) throw Error("'" + number + "' in '" + text + "' is not a number", kHint);
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

void ShapeOptions::validate() const {
  if (max_sessions < 1 || max_sessions > kMaxShapeSessions) {
    throw Error("max_shape_sessions must be a whole number of sessions from 1 to " + std::to_string(kMaxShapeSessions) + ", not " +
                    std::to_string(max_sessions),
                "1 serves every shape from one session, as ONNX Runtime alone does");
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].sizes.empty() || buckets[i].sizes.front() <= 0 || !std::is_sorted(buckets[i].sizes.begin(), buckets[i].sizes.end())) {
      throw Error("the buckets " + to_string(buckets[i]) + " need ascending positive sizes", "Write them as x.2=480,640,960");
    }
    for (size_t j = 0; j < i; ++j) {
      if (buckets[j].input == buckets[i].input && buckets[j].dim == buckets[i].dim) {
        throw Error("buckets for " + buckets[i].input + "." + std::to_string(buckets[i].dim) + " were declared twice", "Declare each dim once");
      }
    }
  }
  for (const auto& [input, value] : pad_values) {
    if (!std::isfinite(value)) throw Error("the pad value of '" + input + "' must be a finite number", "Write it as input_ids=0");
  }
  if (pad_batch && batches.empty() && declared.empty()) {
    throw Error("pad_batch needs declared batches to pad to", "Declare them: --batches 1,2,4,8, batches=[1, 2, 4, 8] or shapes.batches");
  }
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

// --- config file -------------------------------------------------------------------------------

namespace {

constexpr int kConfigFormat = 1;

/// The most threads a config may ask for: far more than useful, far less than what exhausts memory
/// (100000 intra-op threads did).
int max_threads() { return std::max(64, 4 * static_cast<int>(std::thread::hardware_concurrency())); }

json session_json(const SessionOptions& s) {
  return {{"graph_optimization", to_string(s.graph_optimization)},
          {"memory_pattern", s.memory_pattern},
          {"cpu_arena", s.cpu_arena},
          {"intra_op_threads", s.intra_op_threads},
          {"inter_op_threads", s.inter_op_threads},
          {"thread_spinning", s.thread_spinning},
          {"optimized_model_cache", s.optimized_model_cache ? json(*s.optimized_model_cache) : json(nullptr)},
          {"model_cache_format", to_string(s.model_cache_format)},
          {"model_cache_fill", to_string(s.model_cache_fill)},
          {"model_cache_shared", s.model_cache_shared},
          {"cuda_module_loading", s.cuda_module_loading},
          {"cuda_max_connections", s.cuda_max_connections},
          {"config_entries", s.config_entries},
          {"custom_op_libraries", s.custom_op_libraries}};
}

json cuda_json(const CudaOptions& c) {
  json j = {{"conv_algo_search", to_string(c.conv_algo_search)},
            {"conv_use_max_workspace", c.conv_use_max_workspace},
            {"gpu_mem_limit", c.gpu_mem_limit ? json(*c.gpu_mem_limit) : json(nullptr)},
            {"arena_extend_strategy", c.arena_extend == ArenaExtendStrategy::next_power_of_two ? "next_power_of_two"
                                                                                               : "same_as_requested"},
            {"cuda_graph", c.cuda_graph},
            {"tf32", c.tf32},
            {"copy_in_default_stream", c.copy_in_default_stream},
            {"prefer_nhwc", c.prefer_nhwc},
            {"extra", c.extra}};
  return j;
}

/// Reads the keys of one JSON object section, complaining about any it does not know.
class Section {
 public:
  Section(const json& j, std::string path, std::string source) : j_(j), path_(std::move(path)), source_(std::move(source)) {
    if (!j_.is_object()) fail(path_, "must be an object");
  }
  ~Section() = default;
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;

  template <typename T>
  void read(const char* key, T& out, const char* expected) {
    known_.insert(key);
    if (j_.contains(key)) out = value_of<T>(key, expected);
  }
  /// A field that may be null (or absent): nullopt then.
  template <typename T>
  void read_optional(const char* key, std::optional<T>& out, const char* expected) {
    known_.insert(key);
    if (!j_.contains(key) || j_.at(key).is_null()) return;
    out = value_of<T>(key, expected);
  }
  /// An integer field within [lo, hi].
  template <typename T>
  void read_range(const char* key, T& out, T lo, T hi, const char* expected) {
    read(key, out, expected);
    if (!j_.contains(key)) return;
    if (out < lo && lo == 0) fail(path_ + "." + key, "must not be negative (got " + std::to_string(out) + ")");
    if (out < lo || out > hi) fail(path_ + "." + key, "must be " + std::to_string(lo) + " to " + std::to_string(hi) + " (got " + std::to_string(out) + ")");
  }
  void read_enum(const char* key, const std::function<void(const std::string&)>& apply, const char* allowed) {
    known_.insert(key);
    if (!j_.contains(key)) return;
    if (!j_.at(key).is_string()) fail(path_ + "." + key, std::string("must be one of ") + allowed);
    try {
      apply(j_.at(key).get<std::string>());
    } catch (const Error&) {
      fail(path_ + "." + key, std::string("must be one of ") + allowed);
    }
  }
  void allow(const char* key) { known_.insert(key); }
  void finish() const {
    for (const auto& [key, value] : j_.items()) {
      if (!known_.count(key)) {
        std::string known;
        for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
        fail(path_ + "." + key, "is not a known key (known: " + known + ")");
      }
    }
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error("invalid config " + source_ + ": '" + key + "' " + why,
                "Fix the file, or write a fresh one with 'ortfleet tune --write-config'");
  }

 private:
  /// The value of `key` as T, refusing what would change on the way: a fraction or a too-large
  /// number for an integer, a number for a boolean, anything but a string for a string.
  template <typename T>
  T value_of(const char* key, const char* expected) const {
    const json& v = j_.at(key);
    const std::string where = path_ + "." + key;
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) fail(where, std::string("must be ") + expected);
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) fail(where, std::string("must be ") + expected);
      if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                                 : (v.get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                                    (v.get<int64_t>() > 0 && static_cast<uint64_t>(v.get<int64_t>()) > static_cast<uint64_t>(std::numeric_limits<T>::max())))) {
        fail(where, std::string("must be ") + expected + " (" + v.dump() + " is out of range)");
      }
      return v.get<T>();
    } else {
      try {
        return v.get<T>();
      } catch (const json::exception&) {
        fail(where, std::string("must be ") + expected);
      }
    }
  }

  const json& j_;
  std::string path_;
  std::string source_;
  std::set<std::string> known_;
};

}  // namespace

json shapes_json(const ShapeOptions& s) {
  json declared = json::array();
  for (const auto& d : s.declared) declared.push_back(to_string(d));
  json buckets = json::array();
  for (const auto& b : s.buckets) buckets.push_back(to_string(b));
  return {{"declared", declared},
          {"batches", s.batches},
          {"max_sessions", s.max_sessions},
          {"pad_batch", s.pad_batch},
          {"share_weights", s.share_weights},
          {"buckets", buckets},
          {"pad_values", s.pad_values},
          {"policy", to_string(s.policy)}};
}

json warm_pool_json(const WarmPoolOptions& w) {
  return {{"idle_exit_s", w.idle_exit_s ? json(*w.idle_exit_s) : json(nullptr)}};
}

json warmup_json(const WarmupOptions& w) {
  json ranges = json::object();
  for (const auto& [name, r] : w.input_ranges) ranges[name] = {r.lo, r.hi};
  return {{"inputs", w.inputs_file}, {"input_ranges", ranges}};
}

std::string RunConfig::to_json() const {
  json j = {{"ortfleet_config", kConfigFormat}, {"name", name},          {"session", session_json(session)},
            {"cuda", cuda_json(cuda)},          {"shapes", shapes_json(shapes)}, {"warmup", warmup_json(warmup)},
            {"warm_pool", warm_pool_json(warm_pool)}};
  return j.dump(2) + "\n";
}

namespace {

/// The config's "session" section: ONNX Runtime's session options.
void read_session_section(const json& section, const std::string& source, SessionOptions& o) {
  Section s(section, "session", source);
  s.read_enum("graph_optimization", [&](const std::string& v) { o.graph_optimization = parse_graph_optimization(v); },
              "disabled, basic, extended, layout, all");
  s.read("memory_pattern", o.memory_pattern, "true or false");
  s.read("cpu_arena", o.cpu_arena, "true or false");
  s.read_range("intra_op_threads", o.intra_op_threads, 0, max_threads(), "a whole number of threads");
  s.read_range("inter_op_threads", o.inter_op_threads, 0, max_threads(), "a whole number of threads");
  s.read("thread_spinning", o.thread_spinning, "true or false");
  s.read_optional("optimized_model_cache", o.optimized_model_cache, "true, false or null");
  s.read_enum("model_cache_format", [&](const std::string& v) { o.model_cache_format = parse_model_cache_format(v); }, "auto, onnx, ort");
  s.read_enum("model_cache_fill", [&](const std::string& v) { o.model_cache_fill = parse_model_cache_fill(v); }, "background, inline, off");
  s.read("model_cache_shared", o.model_cache_shared, "the path of a folder (\"\": $ORTFLEET_CACHE_SHARED)");
  s.read_enum("cuda_module_loading", [&](const std::string& v) {
    const std::string u = upper(v);
    if (!u.empty() && u != "LAZY" && u != "EAGER") throw Error("bad value");
    o.cuda_module_loading = u;
  }, "\"\", LAZY, EAGER");
  s.read_range("cuda_max_connections", o.cuda_max_connections, 0, 32, "a whole number (0 leaves it as is)");
  s.read("config_entries", o.config_entries, "an object of strings");
  for (const auto& [key, value] : o.config_entries) {
    if (const std::string problem = session_config_entry_problem(key, value); !problem.empty()) s.fail("session.config_entries." + key, problem);
  }
  s.read("custom_op_libraries", o.custom_op_libraries, "a list of shared library paths");
  s.finish();
}

/// The config's "cuda" section: the CUDA EP's options.
void read_cuda_section(const json& section, const std::string& source, CudaOptions& o) {
  Section c(section, "cuda", source);
  c.read_enum("conv_algo_search", [&](const std::string& v) { o.conv_algo_search = parse_conv_algo_search(v); },
              "EXHAUSTIVE, HEURISTIC, DEFAULT");
  c.read("conv_use_max_workspace", o.conv_use_max_workspace, "true or false");
  c.read_optional("gpu_mem_limit", o.gpu_mem_limit, "a number of bytes or null");
  c.read_enum("arena_extend_strategy", [&](const std::string& v) {
    if (v == "next_power_of_two") o.arena_extend = ArenaExtendStrategy::next_power_of_two;
    else if (v == "same_as_requested") o.arena_extend = ArenaExtendStrategy::same_as_requested;
    else throw Error("bad value");
  }, "next_power_of_two, same_as_requested");
  c.read("cuda_graph", o.cuda_graph, "true or false");
  c.read("tf32", o.tf32, "true or false");
  c.read("copy_in_default_stream", o.copy_in_default_stream, "true or false");
  c.read("prefer_nhwc", o.prefer_nhwc, "true or false");
  c.read("extra", o.extra, "an object of strings");
  c.finish();
}

/// The config's "shapes" section; its shapes and buckets are read by the grammar of shapes and sizes.
void read_shapes_section(const json& section, const std::string& source, ShapeOptions& o) {
  Section s(section, "shapes", source);
  std::vector<std::string> declared;
  s.read("declared", declared, "a list of shapes such as \"input=1x3x224x224\"");
  for (const auto& d : declared) {
    try {
      const auto parsed = parse_shape_list(d);
      o.declared.insert(o.declared.end(), parsed.begin(), parsed.end());
    } catch (const Error& e) {
      s.fail("shapes.declared", "has a bad shape: " + e.what_failed());
    }
  }
  s.read("batches", o.batches, "a list of batch sizes");
  for (const auto b : o.batches) {
    if (b <= 0) s.fail("shapes.batches", "must be positive (got " + std::to_string(b) + ")");
  }
  s.read_range("max_sessions", o.max_sessions, 1, kMaxShapeSessions, "a whole number of sessions");
  s.read("pad_batch", o.pad_batch, "true or false");
  s.read("share_weights", o.share_weights, "true or false");
  std::vector<std::string> buckets;
  s.read("buckets", buckets, "a list of buckets such as \"x.2=480,640,960\" or \"x.3=320:960:128\"");
  for (const auto& b : buckets) {
    try {
      o.buckets.push_back(parse_buckets(b));
    } catch (const Error& e) {
      s.fail("shapes.buckets", "has bad buckets: " + e.what_failed());
    }
  }
  s.read("pad_values", o.pad_values, "an object of input name -> number");
  s.read_enum("policy", [&](const std::string& v) { o.policy = parse_shape_policy(v); }, "measured, per-shape, shared");
  s.finish();
  try {
    o.validate();
  } catch (const Error& e) {
    s.fail("shapes", "is contradictory: " + e.what_failed());
  }
}

/// The config's "warmup" section: real inputs and the ranges of generated ones.
void read_warmup_section(const json& section, const std::string& source, WarmupOptions& o) {
  Section w(section, "warmup", source);
  w.read("inputs", o.inputs_file, "the path of a .npz or .npy file");
  std::map<std::string, std::vector<double>> ranges;
  w.read("input_ranges", ranges, "an object of [lo, hi] pairs by input name");
  for (const auto& [name, r] : ranges) {
    if (r.size() != 2 || r[1] < r[0]) w.fail("warmup.input_ranges." + name, "must be [lo, hi] with lo <= hi");
    o.input_ranges[name] = {r[0], r[1]};
  }
  w.finish();
}

void read_warm_pool_section(const json& section, const std::string& source, WarmPoolOptions& o) {
  Section w(section, "warm_pool", source);
  w.read_optional("idle_exit_s", o.idle_exit_s, "a number of seconds (0 leaves no pool) or null");
  if (const auto s = o.idle_exit_s; s && !(*s >= 0 && *s <= 7 * 24 * 3600)) {
    w.fail("warm_pool.idle_exit_s", fmt::format("must be from 0 to 604800 seconds (got {})", *s));
  }
  w.finish();
}

}  // namespace

RunConfig RunConfig::from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("invalid config " + source + ": not JSON (" + std::string(e.what()) + ")",
                "Write a fresh one with 'ortfleet tune --write-config'");
  }
  RunConfig config;
  Section top(j, "config", source);
  int format = 0;
  top.read("ortfleet_config", format, "the format number 1");
  if (format != kConfigFormat) {
    top.fail("ortfleet_config", "must be " + std::to_string(kConfigFormat) + " (this file is not an ortfleet config, or is from another version)");
  }
  top.read("name", config.name, "a string");
  if (j.contains("session")) read_session_section(j.at("session"), source, config.session);
  if (j.contains("cuda")) read_cuda_section(j.at("cuda"), source, config.cuda);
  if (j.contains("shapes")) read_shapes_section(j.at("shapes"), source, config.shapes);
  if (j.contains("warmup")) read_warmup_section(j.at("warmup"), source, config.warmup);
  if (j.contains("warm_pool")) read_warm_pool_section(j.at("warm_pool"), source, config.warm_pool);
  top.allow("warm_pool");
  top.allow("warmup");
  top.allow("shapes");
  top.allow("session");  // read above
  top.allow("cuda");
  top.finish();
  return config;
}

RunConfig RunConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read config " + path, "Check the path");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_json(buffer.str(), path);
}

void RunConfig::save(const std::string& path) const { write_output_file(path, to_json()); }

std::string RunConfig::summary() const {
  const RunConfig d;
  std::vector<std::string> parts;
  if (cuda.conv_algo_search != d.cuda.conv_algo_search) parts.push_back("conv=" + to_string(cuda.conv_algo_search));
  if (cuda.conv_use_max_workspace != d.cuda.conv_use_max_workspace) parts.push_back("max_workspace=0");
  if (cuda.gpu_mem_limit) parts.push_back("gpu_mem_limit=" + std::to_string(*cuda.gpu_mem_limit >> 20) + "MiB");
  if (cuda.arena_extend != d.cuda.arena_extend) parts.push_back("arena=same_as_requested");
  if (cuda.cuda_graph) parts.push_back("cuda_graph");
  if (!cuda.tf32) parts.push_back("tf32=0");
  if (cuda.prefer_nhwc) parts.push_back("nhwc");
  for (const auto& [k, v] : cuda.extra) parts.push_back(k + "=" + v);
  if (session.graph_optimization != d.session.graph_optimization) parts.push_back("opt=" + to_string(session.graph_optimization));
  if (!session.memory_pattern) parts.push_back("mem_pattern=0");
  if (!session.cpu_arena) parts.push_back("cpu_arena=0");
  if (session.intra_op_threads != 0) parts.push_back("intra=" + std::to_string(session.intra_op_threads));
  if (session.inter_op_threads != 0) parts.push_back("inter=" + std::to_string(session.inter_op_threads));
  if (!session.thread_spinning) parts.push_back("spin=0");
  if (session.optimized_model_cache) parts.push_back(*session.optimized_model_cache ? "model_cache" : "no_model_cache");
  if (session.model_cache_format != d.session.model_cache_format) parts.push_back("cache_format=" + to_string(session.model_cache_format));
  if (session.model_cache_fill != d.session.model_cache_fill) parts.push_back("cache_fill=" + to_string(session.model_cache_fill));
  if (!session.model_cache_shared.empty()) parts.push_back("cache_shared=" + session.model_cache_shared);
  if (warm_pool.idle_exit_s) parts.push_back(fmt::format("warm_pool_idle={}", *warm_pool.idle_exit_s));
  if (!session.cuda_module_loading.empty()) parts.push_back("module_loading=" + session.cuda_module_loading);
  if (session.cuda_max_connections != 0) parts.push_back("connections=" + std::to_string(session.cuda_max_connections));
  for (const auto& [k, v] : session.config_entries) parts.push_back(k + "=" + v);
  for (const auto& lib : session.custom_op_libraries) parts.push_back("custom_ops=" + std::filesystem::path(lib).filename().string());
  if (!shapes.declared.empty() || !shapes.batches.empty()) {
    parts.push_back("shapes=" + std::to_string(shapes.declared.size() + shapes.batches.size()));
  }
  if (shapes.max_sessions != ShapeOptions{}.max_sessions) parts.push_back("max_shape_sessions=" + std::to_string(shapes.max_sessions));
  if (shapes.pad_batch) parts.push_back("pad_batch");
  for (const auto& b : shapes.buckets) parts.push_back("buckets:" + to_string(b));
  for (const auto& [input, v] : shapes.pad_values) parts.push_back(fmt::format("pad:{}={}", input, v));
  if (shapes.policy != ShapePolicy::measured) parts.push_back(std::string("shape_policy=") + to_string(shapes.policy));
  if (!shapes.share_weights) parts.push_back("no_shared_weights");
  if (!warmup.inputs_file.empty()) parts.push_back("warmup_inputs=" + std::filesystem::path(warmup.inputs_file).filename().string());
  for (const auto& [input, r] : warmup.input_ranges) parts.push_back(fmt::format("range:{}={}:{}", input, r.lo, r.hi));
  if (parts.empty()) return "defaults";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace ortfleet
