// The config file: a RunConfig written as JSON and read back, every key and value checked, with the
// file and the key named in any refusal (ortfleet tune --write-config, --config).
#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "base/file_reading.hpp"
#include "engine/core/option_values.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {
using nlohmann::json;
using detail::upper;

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
  return {{"idle_exit_s", w.idle_exit_s ? json(*w.idle_exit_s) : json(nullptr)},
          {"park_after_s", w.park_after_s ? json(*w.park_after_s) : json(nullptr)}};
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
  w.read_optional("park_after_s", o.park_after_s, "a number of seconds (0 never parks) or null");
  for (const auto& [key, value] : {std::pair{"warm_pool.idle_exit_s", o.idle_exit_s}, std::pair{"warm_pool.park_after_s", o.park_after_s}}) {
    if (value && !(*value >= 0 && *value <= 7 * 24 * 3600)) w.fail(key, fmt::format("must be from 0 to 604800 seconds (got {})", *value));
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
  return from_json(detail::read_whole_file(path, "the config", "Check the path"), path);
}

void RunConfig::save(const std::string& path) const { write_output_file(path, to_json()); }

}  // namespace ortfleet
