#pragma once
// ONNX Runtime's own log, captured to a file with timestamps on ortfleet's clock.
#include <memory>
#include <string>

namespace ortfleet {

/// Writes every ONNX Runtime log message (verbose and up) to `path` as JSON lines
/// {"t": monotonic ns, "severity": 0-4, "message": "..."} while it lives; `ortfleet profile` reads
/// them to time graph transformers and session-initialisation steps. It does not load the runtime:
/// made before the runtime is loaded, it hears every message from the environment's making on, and
/// the runtime's load stays where the start's timeline puts it (runtime.load).
class OrtLogCapture {
 public:
  explicit OrtLogCapture(const std::string& path);
  ~OrtLogCapture();
  OrtLogCapture(const OrtLogCapture&) = delete;
  OrtLogCapture& operator=(const OrtLogCapture&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// ONNX Runtime says some warnings once per session ("Some nodes were not assigned to the preferred
/// execution providers ..."): by default ortfleet prints the first of each and counts the repeats,
/// its worker processes' included. hold_ort_warnings() holds them all instead, until
/// print_ort_warnings() says each once with how often it came ("onnxruntime (24 times): ..."): what
/// a command does, at its end.
void hold_ort_warnings();
void print_ort_warnings();

}  // namespace ortfleet
