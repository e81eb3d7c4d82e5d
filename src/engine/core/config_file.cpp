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
#include <variant>
#include <type_traits>

#include <fmt/format.h>

#include "ortfleet/engine/config_fields.hpp"
#include "base/file_reading.hpp"
#include "base/json_errors.hpp"
#include "engine/core/option_values.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {

constexpr int kConfigFormat = 1;

/// The value of a key of one value, as the config file writes it.
json field_json(const detail::ConfigField& f, const RunConfig& config) {
  RunConfig copy = config;  // the fields hand out references to a config they may change
  return std::visit(
      [&](auto&& field) -> json {
        using Field = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, detail::ChoiceField>) {
          return field.get(copy);
        } else {
          const auto& value = field(copy);
          using Value = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Value, std::optional<bool>> || std::is_same_v<Value, std::optional<double>> ||
                        std::is_same_v<Value, std::optional<uint64_t>>) {
            return value ? json(*value) : json(nullptr);
          } else {
            return value;
          }
        }
      },
      f.field);
}

/// The keys of one value of `section`, as the config file writes them.
json section_fields_json(const std::string& section, const RunConfig& config) {
  json j = json::object();
  for (const auto& f : detail::config_fields()) {
    if (detail::section_of(f.setting) == section) j[detail::key_in_section(f.setting)] = field_json(f, config);
  }
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
  /// A key of one value, read and checked by its row of the settings table.
  void read_field(const detail::ConfigField& f, RunConfig& config) {
    const std::string key = detail::key_in_section(f.setting);
    known_.insert(key);
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    const std::string where = path_ + "." + key;
    const SettingRow& row = setting_row(f.setting);
    const auto check_number = [&](double number) {
      if (const std::string problem = number_problem(row.values, number); !problem.empty()) fail(where, v.dump() + " " + problem);
    };
    std::visit(
        [&](auto&& field) {
          using Field = std::decay_t<decltype(field)>;
          if constexpr (std::is_same_v<Field, detail::ChoiceField>) {
            if (!v.is_string()) fail(where, std::string("must be one of ") + row.values.words);
            try {
              field.set(config, v.get<std::string>());
            } catch (const Error&) {
              fail(where, std::string("must be one of ") + row.values.words);
            }
          } else {
            auto& out = field(config);
            using Value = std::decay_t<decltype(out)>;
            if constexpr (std::is_same_v<Value, bool>) {
              out = value_of<bool>(key.c_str(), "true or false");
            } else if constexpr (std::is_same_v<Value, int>) {
              out = value_of<int>(key.c_str(), "a whole number");
              check_number(out);
            } else if constexpr (std::is_same_v<Value, std::optional<bool>>) {
              out = v.is_null() ? std::nullopt : std::optional<bool>(value_of<bool>(key.c_str(), "true, false or null"));
            } else if constexpr (std::is_same_v<Value, std::optional<uint64_t>>) {
              out = v.is_null() ? std::nullopt : std::optional<uint64_t>(value_of<uint64_t>(key.c_str(), "a whole number or null"));
              if (out) check_number(static_cast<double>(*out));
            } else if constexpr (std::is_same_v<Value, std::optional<double>>) {
              if (!v.is_null() && !v.is_number()) fail(where, "must be a number or null");
              out = v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
              if (out) check_number(*out);
            } else {
              out = value_of<std::string>(key.c_str(), "a string");
              if (!out.empty()) check_text(f.setting, out);
            }
          }
        },
        f.field);
  }
  /// A text value of `setting` in this section (a path): checked by its row of the settings table.
  void check_text(Setting setting, const std::string& text) const {
    if (const std::string problem = text_problem(setting_row(setting).values, text); !problem.empty()) {
      fail(setting_name(setting), problem);
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

std::string RunConfig::to_json() const {
  json session_j = section_fields_json("session", *this);
  session_j["config_entries"] = session.config_entries;
  session_j["custom_op_libraries"] = session.custom_op_libraries;
  json cuda_j = section_fields_json("cuda", *this);
  cuda_j["extra"] = cuda.extra;
  json shapes_j = section_fields_json("shapes", *this);
  json declared = json::array();
  for (const auto& d : shapes.declared) declared.push_back(to_string(d));
  json buckets = json::array();
  for (const auto& b : shapes.buckets) buckets.push_back(to_string(b));
  shapes_j["declared"] = declared;
  shapes_j["batches"] = shapes.batches;
  shapes_j["buckets"] = buckets;
  shapes_j["pad_values"] = shapes.pad_values;
  json warmup_j = section_fields_json("warmup", *this);
  json ranges = json::object();
  for (const auto& [input, r] : warmup.input_ranges) ranges[input] = {r.lo, r.hi};
  warmup_j["input_ranges"] = ranges;
  json warm_pool_j = section_fields_json("warm_pool", *this);
  warm_pool_j["preload"] = warm_pool.preload;
  json j = {{"ortfleet_config", kConfigFormat}, {"name", name},       {"session", session_j}, {"cuda", cuda_j},
            {"shapes", shapes_j},               {"warmup", warmup_j}, {"warm_pool", warm_pool_j}};
  // Written only where it stacks some: a config without written as before.
  if (!providers.empty()) j["providers"] = providers;
  return j.dump(2) + "\n";
}

namespace {

/// The config's "session" section: ONNX Runtime's session options.
void read_session_section(Section& s, SessionOptions& o) {
  s.read("config_entries", o.config_entries, "an object of strings");
  for (const auto& [key, value] : o.config_entries) {
    if (const std::string problem = session_config_entry_problem(key, value); !problem.empty()) s.fail("session.config_entries." + key, problem);
  }
  s.read("custom_op_libraries", o.custom_op_libraries, "a list of shared library paths");
  for (const auto& library : o.custom_op_libraries) s.check_text(Setting::custom_ops, library);
}

/// The config's "shapes" section; its shapes and buckets are read by the grammar of shapes and sizes.
void read_shapes_section(Section& s, ShapeOptions& o) {
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
}

/// The config's "warmup" section: the ranges of generated inputs (the real ones' file is a key of one value).
void read_warmup_section(Section& w, WarmupOptions& o) {
  std::map<std::string, std::vector<double>> ranges;
  w.read("input_ranges", ranges, "an object of [lo, hi] pairs by input name");
  for (const auto& [name, r] : ranges) {
    if (r.size() != 2 || r[1] < r[0]) w.fail("warmup.input_ranges." + name, "must be [lo, hi] with lo <= hi");
    o.input_ranges[name] = {r[0], r[1]};
  }
}

/// Reads `section` of the config: its keys of one value from the table of fields, then the rest.
void read_section(const json& j, const std::string& section, const std::string& source, RunConfig& config,
                  const std::function<void(Section&)>& rest = {}) {
  if (!j.contains(section)) return;
  Section s(j.at(section), section, source);
  for (const auto& f : detail::config_fields()) {
    if (detail::section_of(f.setting) == section) s.read_field(f, config);
  }
  if (rest) rest(s);
  s.finish();
}

}  // namespace

RunConfig RunConfig::from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("invalid config " + source + ": not JSON (" + detail::json_error_text(e) + ")",
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
  read_section(j, "session", source, config, [&](Section& s) { read_session_section(s, config.session); });
  read_section(j, "cuda", source, config, [&](Section& c) { c.read("extra", config.cuda.extra, "an object of strings"); });
  read_section(j, "shapes", source, config, [&](Section& s) {
    read_shapes_section(s, config.shapes);
    try {
      config.shapes.validate();
    } catch (const Error& e) {
      s.fail("shapes", "is contradictory: " + e.what_failed());
    }
  });
  read_section(j, "warmup", source, config, [&](Section& w) { read_warmup_section(w, config.warmup); });
  read_section(j, "warm_pool", source, config, [&](Section& w) {
    w.read("preload", config.warm_pool.preload, "a list of model paths");
    for (const auto& model : config.warm_pool.preload) w.check_text(Setting::warm_pool_preload, model);
  });
  // Each provider checks its own options when a device's stack is made (engine/providers).
  top.read("providers", config.providers, "an object of execution provider names, each an object of strings");
  for (const char* section : {"session", "cuda", "shapes", "warmup", "warm_pool"}) top.allow(section);  // read above
  top.finish();
  return config;
}

RunConfig RunConfig::load(const std::string& path) {
  return from_json(detail::read_whole_file(path, "the config", "Check the path"), path);
}

void RunConfig::save(const std::string& path) const { write_output_file(path, to_json()); }

}  // namespace ortfleet
