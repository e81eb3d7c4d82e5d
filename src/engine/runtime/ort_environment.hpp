#pragma once
// The process-wide ONNX Runtime environment (one Ort::Env per process, as ONNX Runtime requires),
// with a logger that forwards ONNX Runtime's messages to ours and to temporary listeners such as
// `ortfleet profile`, which timestamps verbose messages to time graph transformers.
#include <cstdint>
#include <functional>
#include <string>

#include "engine/runtime/ort_api.hpp"

namespace ortfleet::detail {

/// The environment; load_runtime() must have succeeded. Thread-safe.
Ort::Env& ort_env();

struct OrtLogRecord {
  int64_t time_ns;  ///< monotonic
  int severity;     ///< OrtLoggingLevel
  std::string category;
  std::string logid;
  std::string location;
  std::string message;
};

/// Receives every ONNX Runtime message of at least `min_severity` while it lives.
class OrtLogListener {
 public:
  OrtLogListener(std::function<void(const OrtLogRecord&)> callback, OrtLoggingLevel min_severity);
  ~OrtLogListener();
  OrtLogListener(const OrtLogListener&) = delete;
  OrtLogListener& operator=(const OrtLogListener&) = delete;

 private:
  int id_;
};

/// The level ONNX Runtime's own messages are printed at (default: warnings; ORTFLEET_ORT_LOG_LEVEL
/// = verbose|info|warning|error|fatal changes it).
void set_ort_print_level(OrtLoggingLevel level);

}  // namespace ortfleet::detail
