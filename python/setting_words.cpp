#include "setting_words.hpp"

#include <array>

#include "ortfleet/base/settings.hpp"

namespace ortfleet::python {

namespace {
// In Setting's order; nullptr: no keyword of the module gives it (a config's key does).
constexpr std::array<const char*, kSettingCount> kKeywords = {
    "devices",             // devices
    "strategy",            // strategy
    "start_timeout",       // start_timeout
    "run_timeout",         // run_timeout
    "ort_library",         // ort_library
    "shapes",              // shapes
    "batches",             // batches
    "buckets",             // buckets
    "max_shape_sessions",  // max_shape_sessions
    "pad_values",          // pad_value
    "warmup_inputs",       // warmup_inputs
    "input_ranges",        // input_range
    nullptr,               // custom_ops
    nullptr,               // cuda_graph
    "warm_pool_idle",      // warm_pool_idle
    nullptr,               // park_after
    nullptr,               // idle_exit
    "socket",              // socket
    nullptr,               // ort_log
    nullptr,               // timeline
};
}  // namespace

std::string in_keywords(const std::string& text) {
  return render_settings(text, [](Setting s, const std::optional<std::string>& value) -> std::optional<std::string> {
    const char* keyword = kKeywords[static_cast<size_t>(s)];
    if (keyword == nullptr) return value ? std::string(setting_name(s)) + "=" + *value : std::string(setting_name(s));
    return std::string(keyword) + "=" + value.value_or("");
  });
}

}  // namespace ortfleet::python
