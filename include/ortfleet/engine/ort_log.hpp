#pragma once
// ONNX Runtime's own log, captured to a file with timestamps on ortfleet's clock.
#include <memory>
#include <string>

namespace ortfleet {

/// Writes every ONNX Runtime log message (verbose and up) to `path` as JSON lines
/// {"t": monotonic ns, "severity": 0-4, "message": "..."} while it lives; `ortfleet profile` reads
/// them to time graph transformers and session-initialisation steps. Loads the runtime if needed.
class OrtLogCapture {
 public:
  explicit OrtLogCapture(const std::string& path, const std::string& ort_library = {});
  ~OrtLogCapture();
  OrtLogCapture(const OrtLogCapture&) = delete;
  OrtLogCapture& operator=(const OrtLogCapture&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
