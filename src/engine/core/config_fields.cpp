// The config file's keys of one value as fields of RunConfig (ortfleet/engine/config_fields.hpp).
#include "ortfleet/engine/config_fields.hpp"

#include <algorithm>
#include <array>

#include "engine/core/option_values.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"

namespace ortfleet::detail {

namespace {

using S = Setting;

ChoiceField arena_extend_field() {
  return {[](const RunConfig& c) -> std::string {
            return c.cuda.arena_extend == ArenaExtendStrategy::next_power_of_two ? "next_power_of_two" : "same_as_requested";
          },
          [](RunConfig& c, const std::string& v) {
            if (v == "next_power_of_two") c.cuda.arena_extend = ArenaExtendStrategy::next_power_of_two;
            else if (v == "same_as_requested") c.cuda.arena_extend = ArenaExtendStrategy::same_as_requested;
            else throw Error("unknown arena extend strategy '" + v + "'", "Use next_power_of_two or same_as_requested");
          }};
}

ChoiceField module_loading_field() {
  return {[](const RunConfig& c) { return c.session.cuda_module_loading; },
          [](RunConfig& c, const std::string& v) {
            const std::string u = upper(v);
            if (!u.empty() && u != "LAZY" && u != "EAGER") throw Error("unknown CUDA module loading '" + v + "'", "Use LAZY or EAGER");
            c.session.cuda_module_loading = u;
          }};
}

const std::array<ConfigField, 28> kFields = {{
    {S::graph_optimization, ChoiceField{[](const RunConfig& c) { return to_string(c.session.graph_optimization); },
                                        [](RunConfig& c, const std::string& v) { c.session.graph_optimization = parse_graph_optimization(v); }}},
    {S::memory_pattern, +[](RunConfig& c) -> bool& { return c.session.memory_pattern; }},
    {S::cpu_arena, +[](RunConfig& c) -> bool& { return c.session.cpu_arena; }},
    {S::intra_threads, +[](RunConfig& c) -> int& { return c.session.intra_op_threads; }},
    {S::inter_threads, +[](RunConfig& c) -> int& { return c.session.inter_op_threads; }},
    {S::thread_spinning, +[](RunConfig& c) -> bool& { return c.session.thread_spinning; }},
    {S::model_cache, +[](RunConfig& c) -> std::optional<bool>& { return c.session.optimized_model_cache; }},
    {S::model_cache_format, ChoiceField{[](const RunConfig& c) { return to_string(c.session.model_cache_format); },
                                        [](RunConfig& c, const std::string& v) { c.session.model_cache_format = parse_model_cache_format(v); }}},
    {S::model_cache_fill, ChoiceField{[](const RunConfig& c) { return to_string(c.session.model_cache_fill); },
                                      [](RunConfig& c, const std::string& v) { c.session.model_cache_fill = parse_model_cache_fill(v); }}},
    {S::tiered_start, ChoiceField{[](const RunConfig& c) { return to_string(c.session.tiered_start); },
                                  [](RunConfig& c, const std::string& v) { c.session.tiered_start = parse_tiered_start(v); }}},
    {S::model_cache_shared, +[](RunConfig& c) -> std::string& { return c.session.model_cache_shared; }},
    {S::module_loading, module_loading_field()},
    {S::max_connections, +[](RunConfig& c) -> int& { return c.session.cuda_max_connections; }},
    {S::conv_algo, ChoiceField{[](const RunConfig& c) { return to_string(c.cuda.conv_algo_search); },
                               [](RunConfig& c, const std::string& v) { c.cuda.conv_algo_search = parse_conv_algo_search(v); }}},
    {S::conv_max_workspace, +[](RunConfig& c) -> bool& { return c.cuda.conv_use_max_workspace; }},
    {S::gpu_mem_limit, +[](RunConfig& c) -> std::optional<uint64_t>& { return c.cuda.gpu_mem_limit; }},
    {S::arena_extend, arena_extend_field()},
    {S::cuda_graph, +[](RunConfig& c) -> bool& { return c.cuda.cuda_graph; }},
    {S::tf32, +[](RunConfig& c) -> bool& { return c.cuda.tf32; }},
    {S::copy_in_default_stream, +[](RunConfig& c) -> bool& { return c.cuda.copy_in_default_stream; }},
    {S::prefer_nhwc, +[](RunConfig& c) -> bool& { return c.cuda.prefer_nhwc; }},
    {S::max_shape_sessions, +[](RunConfig& c) -> int& { return c.shapes.max_sessions; }},
    {S::pad_batch, +[](RunConfig& c) -> bool& { return c.shapes.pad_batch; }},
    {S::share_weights, +[](RunConfig& c) -> bool& { return c.shapes.share_weights; }},
    {S::shape_policy, ChoiceField{[](const RunConfig& c) -> std::string { return to_string(c.shapes.policy); },
                                  [](RunConfig& c, const std::string& v) { c.shapes.policy = parse_shape_policy(v); }}},
    {S::warmup_inputs, +[](RunConfig& c) -> std::string& { return c.warmup.inputs_file; }},
    {S::warm_pool_idle, +[](RunConfig& c) -> std::optional<double>& { return c.warm_pool.idle_exit_s; }},
    {S::warm_pool_park, +[](RunConfig& c) -> std::optional<double>& { return c.warm_pool.park_after_s; }},
}};

}  // namespace

std::span<const ConfigField> config_fields() { return kFields; }

const ConfigField* config_field(Setting setting) {
  const auto found = std::find_if(kFields.begin(), kFields.end(), [&](const ConfigField& f) { return f.setting == setting; });
  return found == kFields.end() ? nullptr : &*found;
}

namespace {
std::string shown_value(const FieldValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&value)) return number_words(*d);
  return std::get<std::string>(value);
}

[[noreturn]] void refuse(Setting s, const FieldValue& value, const std::string& problem) {
  throw Error(named(s, shown_value(value)) + " " + problem);
}
}  // namespace

void set_field(const ConfigField& f, RunConfig& config, const FieldValue& value) {
  const SettingRow& row = setting_row(f.setting);
  const auto number = [&]() -> double {
    const auto* d = std::get_if<double>(&value);
    if (d == nullptr) refuse(f.setting, value, "is not a number: give " + allowed_values(row.values));
    if (const std::string problem = number_problem(row.values, *d); !problem.empty()) refuse(f.setting, value, problem);
    return *d;
  };
  const auto on_off = [&]() -> bool {
    const auto* b = std::get_if<bool>(&value);
    if (b == nullptr) refuse(f.setting, value, "is not true or false");
    return *b;
  };
  const auto text = [&]() -> const std::string& {
    const auto* t = std::get_if<std::string>(&value);
    if (t == nullptr) refuse(f.setting, value, "is not " + allowed_values(row.values));
    if (!t->empty()) checked_text(f.setting, *t);
    return *t;
  };
  std::visit(
      [&](auto&& field) {
        using Field = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, ChoiceField>) {
          const std::string& word = text();
          try {
            field.set(config, word);
          } catch (const Error&) {
            refuse(f.setting, value, "is not " + allowed_values(row.values));
          }
        } else {
          auto& out = field(config);
          using Value = std::decay_t<decltype(out)>;
          if constexpr (std::is_same_v<Value, bool> || std::is_same_v<Value, std::optional<bool>>) out = on_off();
          else if constexpr (std::is_same_v<Value, int>) out = static_cast<int>(number());
          else if constexpr (std::is_same_v<Value, std::optional<uint64_t>>) out = static_cast<uint64_t>(number());
          else if constexpr (std::is_same_v<Value, std::optional<double>>) out = number();
          else out = text();
        }
      },
      f.field);
}

void set_field_from_text(const ConfigField& f, RunConfig& config, const std::string& text) {
  const ValueRule& rule = setting_row(f.setting).values;
  if (rule.kind == ValueKind::on_off) {
    if (const std::string problem = text_problem(rule, text); !problem.empty()) refuse(f.setting, text, problem);
    set_field(f, config, text == "1");
  } else if (rule.kind == ValueKind::whole || rule.kind == ValueKind::number) {
    if (const std::string problem = text_problem(rule, text); !problem.empty()) refuse(f.setting, text, problem);
    set_field(f, config, *parse_decimal(text));
  } else {
    set_field(f, config, text);
  }
}

std::string key_in_section(Setting setting) {
  const std::string name = setting_name(setting);
  return name.substr(name.find('.') + 1);
}

std::string section_of(Setting setting) {
  const std::string name = setting_name(setting);
  return name.substr(0, name.find('.'));
}

}  // namespace ortfleet::detail
