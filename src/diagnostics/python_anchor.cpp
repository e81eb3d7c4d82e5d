#include "diagnostics/python_anchor.hpp"

#include <filesystem>
#include <vector>

#include "base/system_paths.hpp"
#include "process/child_process.hpp"

#ifndef ORTFLEET_SOURCE_DIR
#define ORTFLEET_SOURCE_DIR ""
#endif

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::optional<std::string> find_anchor_script() {
  std::vector<fs::path> candidates;
  if (auto v = env_var("ORTFLEET_PYTHON_ANCHOR")) candidates.emplace_back(*v);
  const fs::path here = own_binary_dir();
  candidates.push_back(here / ".." / "share" / "ortfleet" / "onnxruntime_python.py");
  candidates.push_back(here / "anchors" / "onnxruntime_python.py");
  if (*ORTFLEET_SOURCE_DIR != '\0') candidates.push_back(fs::path(ORTFLEET_SOURCE_DIR) / "bench" / "anchors" / "onnxruntime_python.py");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::exists(c, ec)) return fs::weakly_canonical(c).string();
  }
  return std::nullopt;
}

std::optional<std::string> anchor_problem(const std::string& python) {
  const auto probe = run_child({python, "-c", "import onnxruntime, numpy; print(onnxruntime.__version__)"}, {}, "", 120);
  if (probe.exit_code == 0) return std::nullopt;
  return python + " cannot import onnxruntime and numpy (" + probe.describe() + ")";
}

}  // namespace ortfleet::detail
