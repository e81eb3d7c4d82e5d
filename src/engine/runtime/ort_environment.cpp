#include "engine/runtime/ort_environment.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <string_view>
#include <mutex>
#include <utility>

#include "base/environment.hpp"
#include "ortfleet/base/error.hpp"
#include "engine/runtime/runtime.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "base/system_paths.hpp"

namespace ortfleet::detail {
namespace {

struct LogState {
  std::mutex mutex;
  std::map<int, std::pair<std::function<void(const OrtLogRecord&)>, OrtLoggingLevel>> listeners;
  int next_id = 1;
  OrtLoggingLevel print_level = ORT_LOGGING_LEVEL_WARNING;
  Ort::Env* env = nullptr;
  OrtWarningMode warning_mode = OrtWarningMode::first_each;
  OrtWarningTally warnings;
};

LogState& log_state() {
  static LogState* state = new LogState;  // outlives every session, including static destructors
  return *state;
}

OrtLoggingLevel effective_level(const LogState& s) {
  OrtLoggingLevel level = s.print_level;
  for (const auto& [id, entry] : s.listeners) level = std::min(level, entry.second);
  return level;
}

/// Warnings ortfleet expects and handles, shown as info: the optimised-model cache saves graphs with
/// hardware-specific optimisations on purpose, and keys its entries by device and CPU model; and a
/// cached ORT-format entry that ortfleet mapped itself (a fleet's start reads the model mapped) is
/// given as bytes, so ONNX Runtime's own mapping, asked for the entry file, has nothing to do (the
/// weights are still used in place: session.use_ort_model_bytes_for_initializers).
bool expected_warning(const char* message) {
  constexpr std::string_view kExpected[] = {"Serializing optimized model with Graph Optimization level greater than",
                                            "session.use_memory_mapped_ort_model is ignored when loading from a buffer"};
  return message != nullptr &&
         std::any_of(std::begin(kExpected), std::end(kExpected), [&](std::string_view e) { return std::string_view(message).starts_with(e); });
}

/// ONNX Runtime's log line of a run that failed: the run's error says it (rethrow_ort_error, with the
/// raw text at debug level), so the line is a duplicate, shown at debug level only.
bool run_failure(OrtLoggingLevel severity, const char* message) {
  return severity == ORT_LOGGING_LEVEL_ERROR && message != nullptr &&
         std::strncmp(message, "Non-zero status code returned while running ", 44) == 0;
}

void print_ort_message(spdlog::level::level_enum level, const std::string& message, int64_t count) {
  if (count > 1) spdlog::log(level, "onnxruntime ({} times): {}", count, message);
  else spdlog::log(level, "onnxruntime: {}", message);
}

/// Counts a warning (with `s.mutex` held) and prints it where the mode says so.
void count_warning(LogState& s, const std::string& message, int64_t count) {
  const bool first = s.warnings.note(message, count);
  if (s.warning_mode != OrtWarningMode::first_each) return;
  s.warnings.take();  // printed, or a repeat of one printed: either way nothing waits
  if (first) print_ort_message(spdlog::level::warn, message, 1);
  else spdlog::debug("onnxruntime (again): {}", message);
}

void ORT_API_CALL forward_log(void* /*param*/, OrtLoggingLevel severity, const char* category, const char* logid,
                              const char* location, const char* message) {
  note_ort_log(severity, category, logid, location, message);
}

OrtLoggingLevel level_from_env() {
  const auto v = env_value(EnvVar::ort_log_level);
  if (!v) return ORT_LOGGING_LEVEL_WARNING;
  if (*v == "verbose") return ORT_LOGGING_LEVEL_VERBOSE;
  if (*v == "info") return ORT_LOGGING_LEVEL_INFO;
  if (*v == "error") return ORT_LOGGING_LEVEL_ERROR;
  if (*v == "fatal") return ORT_LOGGING_LEVEL_FATAL;
  return ORT_LOGGING_LEVEL_WARNING;
}

/// Called without the mutex held: ONNX Runtime may log from inside these calls.
void apply_level(LogState& s) {
  OrtLoggingLevel level;
  Ort::Env* env;
  {
    std::lock_guard lock(s.mutex);
    level = effective_level(s);
    env = s.env;
  }
  if (env != nullptr) env->UpdateEnvWithCustomLogLevel(level);
}

}  // namespace

Ort::Env& ort_env() {
  static Ort::Env* env = [] {
    auto& s = log_state();
    ort_api_base();  // throws a clear error if the runtime is not loaded
    OrtLoggingLevel level;
    {
      std::lock_guard lock(s.mutex);
      s.print_level = level_from_env();
      level = effective_level(s);
    }
    auto* created = new Ort::Env(level, "ortfleet", forward_log, nullptr);  // lives as long as the process
    // Events off as well (builds whose telemetry is event-based); the uploader of builds that have one
    // was kept from starting before the library was loaded (keep_ort_telemetry_off, runtime.cpp).
    created->DisableTelemetryEvents();
    std::lock_guard lock(s.mutex);
    s.env = created;
    return created;
  }();
  return *env;
}

OrtLogListener::OrtLogListener(std::function<void(const OrtLogRecord&)> callback, OrtLoggingLevel min_severity) {
  // Before the runtime is loaded too: ort_env() makes the environment at the level its listeners ask.
  auto& s = log_state();
  {
    std::lock_guard lock(s.mutex);
    id_ = s.next_id++;
    s.listeners[id_] = {std::move(callback), min_severity};
  }
  apply_level(s);
}

OrtLogListener::~OrtLogListener() {
  auto& s = log_state();
  {
    std::lock_guard lock(s.mutex);
    s.listeners.erase(id_);
  }
  apply_level(s);
}

bool OrtWarningTally::note(const std::string& message, int64_t count) {
  const bool first = std::find(seen_.begin(), seen_.end(), message) == seen_.end();
  if (first) seen_.push_back(message);
  const auto pending = std::find_if(pending_.begin(), pending_.end(), [&](const OrtWarningCount& w) { return w.message == message; });
  if (pending == pending_.end()) pending_.push_back({message, count});
  else pending->count += count;
  return first;
}

std::vector<OrtWarningCount> OrtWarningTally::take() { return std::exchange(pending_, {}); }

void note_ort_log(OrtLoggingLevel severity, const char* category, const char* logid, const char* location, const char* message) {
  auto& s = log_state();
  if (severity == ORT_LOGGING_LEVEL_WARNING && expected_warning(message)) severity = ORT_LOGGING_LEVEL_INFO;
  OrtLogRecord record{monotonic_ns(), severity, category ? category : "", logid ? logid : "", location ? location : "",
                      message ? message : ""};
  std::lock_guard lock(s.mutex);
  for (const auto& [id, entry] : s.listeners) {
    if (severity >= entry.second) entry.first(record);
  }
  if (severity < s.print_level) return;
  if (run_failure(severity, message)) {
    spdlog::debug("onnxruntime: {}", record.message);
    return;
  }
  if (severity == ORT_LOGGING_LEVEL_WARNING) {
    count_warning(s, record.message, 1);
    return;
  }
  print_ort_message(severity >= ORT_LOGGING_LEVEL_ERROR ? spdlog::level::err : spdlog::level::info, record.message, 1);
}

void set_ort_warning_mode(OrtWarningMode mode) {
  auto& s = log_state();
  std::lock_guard lock(s.mutex);
  s.warning_mode = mode;
}

std::vector<OrtWarningCount> take_ort_warnings() {
  auto& s = log_state();
  std::lock_guard lock(s.mutex);
  return s.warnings.take();
}

void add_ort_warnings(const std::vector<OrtWarningCount>& warnings) {
  auto& s = log_state();
  std::lock_guard lock(s.mutex);
  for (const auto& w : warnings) count_warning(s, w.message, w.count);
}

void print_ort_warnings() {
  for (const auto& w : take_ort_warnings()) print_ort_message(spdlog::level::warn, w.message, w.count);
}

}  // namespace ortfleet::detail
