#pragma once
// Every setting a user (or a parent process) gives ortfleet, in one table (src/base/settings.cpp): its
// library name, the command line's flag, the Python module's keyword, the values it takes and their one
// check, its default and what it does. The front ends make their flags, keywords, help and words from
// it, the config file its keys, the environment's registry (src/base/environment.hpp) the checks of its
// ORTFLEET_* variables; tests walk it (tests/base/test_settings.cpp and the tests of each front end).
//
// A message that says what to change names the setting between backquotes by the library's own name for
// it (a RunConfig key, a FleetOptions field), and the value to give it after '=': "`shapes.buckets`",
// "`shapes.buckets=x.2=480,640`". The library says no front end's words: each front end says the
// settings in its own when it shows a message (render_settings): the command line its flags
// ("--buckets x.2=480,640"), the Python module its keywords ("buckets=x.2=480,640").
#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet {

enum class Setting {
  // What a start is and where it runs (FleetOptions).
  model,
  devices,
  strategy,
  config,
  warmup_runs,
  start_timeout,
  run_timeout,
  ort_library,
  profile_dir,
  pool,
  narrow_workers,
  one_process,
  auto_pool,
  request_ring,
  worker_executable,
  // The config file's keys (RunConfig): ONNX Runtime's session options.
  graph_optimization,
  memory_pattern,
  cpu_arena,
  intra_threads,
  inter_threads,
  thread_spinning,
  model_cache,
  model_cache_format,
  model_cache_fill,
  tiered_start,
  model_cache_shared,
  module_loading,
  max_connections,
  session_config,
  custom_ops,
  // The CUDA EP's options.
  conv_algo,
  conv_max_workspace,
  gpu_mem_limit,
  arena_extend,
  cuda_graph,
  tf32,
  copy_in_default_stream,
  prefer_nhwc,
  cuda_extra,
  // The shapes a session serves.
  shapes,
  batches,
  max_shape_sessions,
  pad_batch,
  share_weights,
  buckets,
  pad_value,
  shape_policy,
  // What warm-up feeds the model.
  warmup_inputs,
  input_range,
  // The warm pool a start leaves.
  warm_pool_idle,
  warm_pool_park,
  warm_pool_preload,
  // A pool server (`ortfleet serve`, ortfleet.Pool).
  socket,
  idle_exit,
  park_after,
  max_resident,
  preload,
  preload_cached,
  preload_budget,
  remember_served,
  unload_above,
  // Files a command writes.
  ort_log,
  timeline,
  // Where ortfleet finds things and how it behaves, given only by the environment.
  cache_root,
  ort_root,
  ort_log_level,
  cuda_ep,
  cudnn_choices,
  park_trim,
  ring_spin,
  crash_handler,
  web_dir,
  python_anchor,
  // What a parent tells the children it spawns.
  worker_log_level,
  worker_background,
  spawn_time,
  crash_fd,
  // Tests only.
  test_worker_start_delay,
  test_worker_init_delay,
  test_import_kill_at,
  test_cudnn_device,
  test_tier_disagree,
  test_park_cpu,
  count_,  // not a setting: how many there are
};
inline constexpr size_t kSettingCount = static_cast<size_t>(Setting::count_);

/// Where a setting belongs.
enum class SettingScope {
  fleet,        ///< an option of a fleet's start (FleetOptions)
  config,       ///< a key of the config file (RunConfig): the name is its path, "shapes.buckets"
  serve,        ///< an option of a pool server (ServeOptions, PoolOptions)
  output,       ///< a file a command writes
  environment,  ///< given only by an ORTFLEET_* variable: where ortfleet finds things, how it logs
  handed_down,  ///< set by a parent in the children it spawns
  tests,        ///< tests only
};

/// The kinds of value a setting takes.
enum class ValueKind {
  on_off,      ///< true or false: a flag, a config boolean, 0 or 1 in the environment
  whole,       ///< a whole number from lo to hi
  number,      ///< a number from lo to hi (above lo where above_lo)
  choice,      ///< one of `words`
  path,        ///< a path (no NUL byte; absolute where `absolute`), or one of `words`
  text,        ///< text of the setting's own grammar (no NUL byte), read by its own parser
  word_list,   ///< a comma-separated list of `words`
  assignment,  ///< NAME=NUMBER, the number from lo to hi
};

/// What values a setting takes: its one check, wherever the value comes from.
struct ValueRule {
  ValueKind kind = ValueKind::text;
  double lo = 0;
  double hi = 0;
  const char* unit = "";   ///< "seconds", "microseconds"; "" for a plain count
  bool above_lo = false;   ///< lo itself is refused (a time limit of 0)
  const char* words = "";  ///< the choices ("auto, onnx, ort"), a list's words, or a path's alternatives ("0")
  bool absolute = false;   ///< a path that must be absolute
  /// A whole number's highest value is at least this many per core of the machine (threads).
  double hi_per_core = 0;
};

/// The longest time a setting of seconds takes: a week.
inline constexpr double kWeekS = 7 * 24 * 3600.0;

/// What a bad value of a setting's ORTFLEET_* variable does: refuses the work (one line naming it), or
/// is warned about once and left out (a setting that cannot fail a job: how much is logged, polled).
enum class BadVariable { refuse, warn };

struct SettingRow {
  Setting id;
  const char* name;      ///< the library's name: a config key ("shapes.buckets") or an option ("start_timeout_s")
  SettingScope scope;
  const char* flag;      ///< the command line's flag ("--buckets"), or nullptr
  const char* keyword;   ///< the Python module's keyword ("buckets"), or nullptr
  ValueRule values;
  const char* default_text;  ///< as a person reads it ("7200", "auto"); "" where it has none worth saying
  const char* help;          ///< what it does: the flag's help and the keyword's line of Fleet's docstring
  BadVariable bad_variable = BadVariable::refuse;
  const char* python_type = nullptr;     ///< the keyword's type in Fleet's signature; nullptr: made from `values`
  const char* python_default = nullptr;  ///< the keyword's default as Python writes it; nullptr: None
  const char* python_help = nullptr;     ///< what the keyword takes, where Python gives more than text; nullptr: help
};

/// The table, in Setting's order.
std::span<const SettingRow> all_settings();
const SettingRow& setting_row(Setting s);

/// The library's name of `s`: "shapes.buckets", "devices".
const char* setting_name(Setting s);
/// The setting a library name names, or nothing.
std::optional<Setting> setting_named(std::string_view name);
/// The setting a flag ("--buckets") or a Python keyword ("buckets") gives, or nothing.
std::optional<Setting> setting_of_flag(std::string_view flag);
std::optional<Setting> setting_of_keyword(std::string_view keyword);

/// How a message names `s`: "`shapes.buckets`"; with the value to give it, "`shapes.buckets=x.2=480`".
std::string named(Setting s);
std::string named(Setting s, const std::string& value);

/// How a front end says a setting a message names, with the value it was named with (if any); nothing
/// leaves it as the message named it.
using SettingWords = std::function<std::optional<std::string>(Setting setting, const std::optional<std::string>& value)>;
/// `text` with every setting it names said in `words`.
std::string render_settings(const std::string& text, const SettingWords& words);

// --- the one check of a value ------------------------------------------------------------------------

/// The highest value `rule` takes on this machine (hi, or hi_per_core per core where that is more).
double highest_value(const ValueRule& rule);
/// What `rule` takes, in words: "a number of seconds from 0 to 604800", "one of auto, onnx, ort".
std::string allowed_values(const ValueRule& rule);
/// The words of a choice or a list: "auto, onnx, ort" -> {"auto", "onnx", "ort"}.
std::vector<std::string> value_words(const ValueRule& rule);
/// A number as it is typed: "604800", "0.5", "inf".
std::string number_words(double value);
/// What is wrong with the number `value` for `rule`, or "" when nothing is: "is out of range: give a
/// number of seconds above 0 and at most 604800" (infinity and NaN are out of every range).
std::string number_problem(const ValueRule& rule, double value);
/// What is wrong with `text` as a value of `rule` (a flag's text, an environment variable's), or "":
/// "is not a number: give a number of seconds from 0 to 604800", "is not one of verbose, info, ...".
std::string text_problem(const ValueRule& rule, std::string_view text);

/// `value` of the number setting `s`, checked: an ortfleet::Error naming the setting and the value
/// ("`start_timeout_s=inf` is out of range: give a number of seconds above 0 and at most 604800"),
/// which each front end says in its words (--timeout inf, start_timeout=inf).
double checked_number(Setting s, double value);
/// `text` of `s`, checked the same way (a path with a NUL byte, a word that is not a choice).
const std::string& checked_text(Setting s, const std::string& text);

/// Checks this process's ORTFLEET_* variables once it starts work (src/base/environment.hpp, their
/// registry): every one that is set is read as its readers read it (the first bad one whose setting
/// refuses one throws an ortfleet::Error of one line naming it; the others are warned about once), and
/// each ORTFLEET_ name the registry does not list is warned about once, with the name it may be a typo
/// of. The command line calls it before any command; a Fleet and a Pool as they are made.
void check_environment();

}  // namespace ortfleet
