#pragma once
// The Python anchor: bench/anchors/onnxruntime_python.py, what users run today (onnxruntime's Python
// API), which `bench` times beside ortfleet's own rows.
#include <optional>
#include <string>

namespace ortfleet::detail {

/// The anchor script: $ORTFLEET_PYTHON_ANCHOR, the installed copy, the one beside this binary, or the
/// source tree's.
std::optional<std::string> find_anchor_script();

/// Why `python` cannot run the anchors (it cannot import onnxruntime and numpy), or nothing when it can.
std::optional<std::string> anchor_problem(const std::string& python);

}  // namespace ortfleet::detail
