#pragma once
// The settings a user gives ortfleet, as the library's messages name them (src/base/settings.cpp). A
// message that says what to change names the setting between backquotes by the library's own name for
// it (a RunConfig key, a FleetOptions field), and the value to give it after '=': "`shapes.buckets`",
// "`shapes.buckets=x.2=480,640`". The library says no front end's words: each front end says the
// settings in its own when it shows a message (render_settings): the command line its flags
// ("--buckets x.2=480,640"), the Python module its keywords ("buckets=x.2=480,640").
#include <array>
#include <functional>
#include <optional>
#include <string>

namespace ortfleet {

enum class Setting {
  devices,
  strategy,
  start_timeout,
  run_timeout,
  ort_library,
  shapes,
  batches,
  buckets,
  max_shape_sessions,
  pad_value,
  warmup_inputs,
  input_range,
  custom_ops,
  cuda_graph,
  warm_pool_idle,
  park_after,
  idle_exit,
  socket,
  ort_log,
  timeline,
  count_,  // not a setting: how many there are
};
inline constexpr size_t kSettingCount = static_cast<size_t>(Setting::count_);

/// The library's name of `s`: "shapes.buckets", "devices".
const char* setting_name(Setting s);
/// The setting a library name names, or nothing.
std::optional<Setting> setting_named(const std::string& name);

/// How a message names `s`: "`shapes.buckets`"; with the value to give it, "`shapes.buckets=x.2=480`".
std::string named(Setting s);
std::string named(Setting s, const std::string& value);

/// How a front end says a setting a message names, with the value it was named with (if any); nothing
/// leaves it as the message named it.
using SettingWords = std::function<std::optional<std::string>(Setting setting, const std::optional<std::string>& value)>;
/// `text` with every setting it names said in `words`.
std::string render_settings(const std::string& text, const SettingWords& words);

}  // namespace ortfleet
