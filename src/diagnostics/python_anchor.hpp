#pragma once
// The Python anchor: bench/anchors/onnxruntime_python.py, what users run today (onnxruntime's Python
// API), which `bench` times beside ortfleet's own rows.
#include <optional>
#include <string>
#include <vector>

namespace ortfleet::detail {

/// The anchor script: $ORTFLEET_PYTHON_ANCHOR, the installed copy, the one beside this binary, or the
/// source tree's.
std::optional<std::string> find_anchor_script();

/// Why `python` cannot run the anchors (it cannot import onnxruntime and numpy) and how to get them
/// (anchor_install_hint), or nothing when it can.
std::optional<std::string> anchor_problem(const std::string& python);

/// How to give `python` what the anchors import: the pip line, pinned to the ONNX Runtime ortfleet
/// loaded, or another interpreter (--python).
std::string anchor_install_hint(const std::string& python);

/// The cause of an anchor's crash on a GPU, in words, when its onnxruntime has a core built without
/// CUDA (no CUDAExecutionProvider among `providers`, its get_available_providers()) under the CUDA EP
/// library the anchors attach, as doctor names it for ortfleet's own core; empty when `error` is no
/// crash (a signal, a pool process that died) or the core has CUDA.
std::string anchor_crash_cause(const std::string& error, const std::string& python, const std::vector<std::string>& providers);

/// `error`, the failure of an anchor on a GPU, with the cause of a crash named (anchor_crash_cause,
/// `python`'s providers asked once per process).
std::string explain_anchor_failure(const std::string& error, const std::string& python);

}  // namespace ortfleet::detail
