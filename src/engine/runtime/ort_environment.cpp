#include "engine/runtime/ort_environment.hpp"

#include <spdlog/spdlog.h>

#include <cstring>
#include <map>
#include <mutex>

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
/// hardware-specific optimisations on purpose, and keys its entries by device and CPU model.
bool expected_warning(const char* message) {
  return message != nullptr &&
         std::strncmp(message, "Serializing optimized model with Graph Optimization level greater than", 70) == 0;
}

void ORT_API_CALL forward_log(void* /*param*/, OrtLoggingLevel severity, const char* category, const char* logid,
                              const char* location, const char* message) {
  auto& s = log_state();
  if (severity == ORT_LOGGING_LEVEL_WARNING && expected_warning(message)) severity = ORT_LOGGING_LEVEL_INFO;
  OrtLogRecord record{monotonic_ns(), severity, category ? category : "", logid ? logid : "", location ? location : "",
                      message ? message : ""};
  std::lock_guard lock(s.mutex);
  for (const auto& [id, entry] : s.listeners) {
    if (severity >= entry.second) entry.first(record);
  }
  if (severity >= s.print_level) {
    const auto level = severity >= ORT_LOGGING_LEVEL_ERROR ? spdlog::level::err
                       : severity == ORT_LOGGING_LEVEL_WARNING ? spdlog::level::warn
                                                               : spdlog::level::info;
    spdlog::log(level, "onnxruntime: {}", record.message);
  }
}

OrtLoggingLevel level_from_env() {
  const auto v = env_var("ORTFLEET_ORT_LOG_LEVEL");
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
    std::lock_guard lock(s.mutex);
    s.env = created;
    return created;
  }();
  return *env;
}

OrtLogListener::OrtLogListener(std::function<void(const OrtLogRecord&)> callback, OrtLoggingLevel min_severity) {
  ort_env();
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

void set_ort_print_level(OrtLoggingLevel level) {
  ort_env();
  auto& s = log_state();
  {
    std::lock_guard lock(s.mutex);
    s.print_level = level;
  }
  apply_level(s);
}

}  // namespace ortfleet::detail
