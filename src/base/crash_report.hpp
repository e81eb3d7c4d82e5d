#pragma once
// A crash inside a library (ONNX Runtime, its CUDA EP, cuDNN) must not end a process with a bare
// "Segmentation fault". Code that calls into such a library marks what it is doing with a
// CrashScope; a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) then prints one line per
// activity of the crashing thread -- or of every thread when the crash is on a thread nobody marked,
// such as ONNX Runtime's own pool threads -- saying which phase, which model, which device and which
// signal, and the command that locates the crashing node. The handler uses only async-signal-safe
// calls, then hands the signal to whatever handled it before (Python's faulthandler, the default:
// the process still dies of the signal, so a parent sees the same exit status).
#include <string>

namespace ortfleet {

/// The text a CrashScope shows for `phase` ("creating the session", "the first inference", "a run")
/// of `model` on `device`: made once, so that a scope around every run costs no formatting.
/// `locate_flags`: what the locating command needs besides the model and device (" --custom-ops X").
std::string crash_text(const std::string& phase, const std::string& model, const std::string& device,
                       const std::string& locate_flags = {});

/// The text a CrashScope shows while `library` is loaded (`what`: "ONNX Runtime", "the custom-op
/// library"): a crash then names the library, never a model or its node.
std::string library_crash_text(const std::string& what, const std::string& library);

class CrashScope {
 public:
  /// Marks this thread as doing what `text` (crash_text) says until the scope ends. Cheap: a slot
  /// in a fixed table and a copy of the text, no allocation. A crash also writes the line to
  /// `record_path` when given (engine/crash_records.hpp), so that the next start knows.
  explicit CrashScope(const std::string& text, const std::string& record_path = {});
  ~CrashScope();
  CrashScope(const CrashScope&) = delete;
  CrashScope& operator=(const CrashScope&) = delete;

 private:
  int slot_ = -1;
};

/// Installs the fatal-signal handler once per process (later calls do nothing). Also writes every
/// crash line to the file descriptor named by ORTFLEET_CRASH_FD, where a parent reads it.
/// ORTFLEET_CRASH_HANDLER=0 leaves signals alone and makes every CrashScope a no-op (bench A/B).
void install_crash_handler();

}  // namespace ortfleet
