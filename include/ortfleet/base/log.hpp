#pragma once
// ortfleet's log in a program that embeds the library: its records (and ONNX Runtime's messages, which
// pass through it) go to spdlog's default logger (ortfleet's executables print it on stderr), or to a
// program's own log (the Python module hands them to Python's logging).
#include <functional>
#include <string>

namespace ortfleet {

enum class LogLevel { debug, info, warning, error };

/// Every record from now on goes to `handler`, with its level, instead of being printed. It is called
/// on whatever thread logs, with locks of ortfleet's held: it must return at once (queue, not wait).
void set_log_handler(std::function<void(LogLevel level, const std::string& text)> handler);
/// The least level recorded (default info); worker processes started later log at it too.
void set_log_level(LogLevel level);

}  // namespace ortfleet
