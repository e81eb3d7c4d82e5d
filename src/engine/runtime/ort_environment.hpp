#pragma once
// The process-wide ONNX Runtime environment (one Ort::Env per process, as ONNX Runtime requires),
// with a logger that forwards ONNX Runtime's messages to ours and to temporary listeners such as
// `ortfleet profile`, which timestamps verbose messages to time graph transformers.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

/// One of ONNX Runtime's warnings and how often it came.
struct OrtWarningCount {
  std::string message;
  int64_t count = 0;
  bool operator==(const OrtWarningCount&) const = default;
};

/// ONNX Runtime's warnings by their text: it says the same one once per session ("Some nodes were not
/// assigned to the preferred execution providers ..."), which on 8 GPUs and a few shapes is dozens of
/// lines. Counts what has not been printed or handed on yet.
class OrtWarningTally {
 public:
  /// Counts `count` more of `message`; true when this tally has never seen it before.
  bool note(const std::string& message, int64_t count = 1);
  /// What was noted since the last take(), in the order first noted; then forgets the counts (but
  /// remembers every message it has seen).
  std::vector<OrtWarningCount> take();

 private:
  std::vector<OrtWarningCount> pending_;
  std::vector<std::string> seen_;
};

/// How this process treats ONNX Runtime's warnings: print the first of each as it comes (the default;
/// repeats are counted, not printed), hold them all for print_ort_warnings() (a command, which says
/// each once with its count at the end), or hand them to the parent (a worker process, whose replies
/// carry them: take_ort_warnings()).
enum class OrtWarningMode { first_each, at_the_end, hand_over };
void set_ort_warning_mode(OrtWarningMode mode);
/// The warnings noted since the last call (a worker's, for its next reply).
std::vector<OrtWarningCount> take_ort_warnings();
/// Warnings a worker process handed over, counted with this process's own (the first of each printed
/// at once in first_each mode).
void add_ort_warnings(const std::vector<OrtWarningCount>& warnings);
/// Prints every warning not printed yet, once with its count: "onnxruntime (24 times): ...".
void print_ort_warnings();
/// What ONNX Runtime's logger hands ortfleet (tests feed it directly).
void note_ort_log(OrtLoggingLevel severity, const char* category, const char* logid, const char* location, const char* message);

}  // namespace ortfleet::detail
