#pragma once
// Models known to crash ONNX Runtime on this machine. When a session's process dies of a crash inside
// ONNX Runtime, the fatal-signal handler (base/crash_report.hpp) writes its line into a record named
// after the model file's identity (path, inode, size, times) under <cache root>/crashes/. `auto` then
// starts that model in a worker process, where a crash cannot take the caller down, and a pool refuses
// it at once with the reason. A changed model file has another identity: its record no longer applies.
#include <optional>
#include <string>

namespace ortfleet::detail {

/// Where a crash of `model` is recorded ("" when there is no cache folder to record it in). Makes the
/// folder when `make_folder`.
std::string crash_record_path(const std::string& model, bool make_folder);

/// The crash line recorded for `model` as it is now, if it crashed before.
std::optional<std::string> known_crash(const std::string& model);

}  // namespace ortfleet::detail
