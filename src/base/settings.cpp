#include "ortfleet/base/settings.hpp"

#include <regex>

namespace ortfleet {

namespace {
constexpr std::array<const char*, kSettingCount> kNames = {
    "devices",                      // devices
    "strategy",                     // strategy
    "start_timeout_s",              // start_timeout
    "run_timeout_s",                // run_timeout
    "ort_library",                  // ort_library
    "shapes.declared",              // shapes
    "shapes.batches",               // batches
    "shapes.buckets",               // buckets
    "shapes.max_sessions",          // max_shape_sessions
    "shapes.pad_values",            // pad_value
    "warmup.inputs_file",           // warmup_inputs
    "warmup.input_ranges",          // input_range
    "session.custom_op_libraries",  // custom_ops
    "cuda.cuda_graph",              // cuda_graph
    "warm_pool.idle_exit_s",        // warm_pool_idle
    "park_after_s",                 // park_after
    "idle_exit_s",                  // idle_exit
    "socket_path",                  // socket
    "ort_log",                      // ort_log
    "timeline",                     // timeline
};
}  // namespace

const char* setting_name(Setting s) { return kNames[static_cast<size_t>(s)]; }

std::optional<Setting> setting_named(const std::string& name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<Setting>(i);
  }
  return std::nullopt;
}

std::string named(Setting s) { return std::string("`") + setting_name(s) + "`"; }

std::string named(Setting s, const std::string& value) { return std::string("`") + setting_name(s) + "=" + value + "`"; }

std::string render_settings(const std::string& text, const SettingWords& words) {
  static const std::regex marker("`([a-z_.]+)(=([^`]*))?`");
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

}  // namespace ortfleet
