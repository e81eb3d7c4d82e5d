#include "diagnostics/python_anchor.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/environment.hpp"
#include "base/system_paths.hpp"
#include "engine/cuda/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "process/child_process.hpp"

#ifndef ORTFLEET_SOURCE_DIR
#define ORTFLEET_SOURCE_DIR ""
#endif

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::optional<std::string> find_anchor_script() {
  std::vector<fs::path> candidates;
  if (auto v = env_value(EnvVar::python_anchor)) candidates.emplace_back(*v);
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

std::string anchor_install_hint(const std::string& python) {
  // The anchors time the same ONNX Runtime as ortfleet's rows: the version ortfleet loaded, when it has.
  const RuntimeInfo* runtime = loaded_runtime();
  const std::string pin = runtime != nullptr && !runtime->version.empty() ? "==" + runtime->version : "";
  return "to time what users run today beside ortfleet, install them for it: " + python + " -m pip install onnxruntime" + pin +
         " numpy (onnxruntime-gpu" + pin + " for GPUs), or name an interpreter that has them (--python; python= from Python)";
}

std::optional<std::string> anchor_problem(const std::string& python) {
  const auto probe = run_child({python, "-c", "import onnxruntime, numpy; print(onnxruntime.__version__)"}, {}, "", 120);
  if (probe.exit_code == 0) return std::nullopt;
  return python + " cannot import onnxruntime and numpy (" + probe.describe() + "): " + anchor_install_hint(python);
}

namespace {
bool crashed(const std::string& error) {
  return error.find("killed by signal") != std::string::npos || error.find("a pool process died") != std::string::npos;
}
}  // namespace

std::string anchor_crash_cause(const std::string& error, const std::string& python, const std::vector<std::string>& providers) {
  if (!crashed(error) || providers.empty() || std::find(providers.begin(), providers.end(), "CUDAExecutionProvider") != providers.end()) return {};
  std::string listed;
  for (const auto& p : providers) listed += (listed.empty() ? "" : ", ") + p;
  return "the cause: onnxruntime in " + python + " has a core built without CUDA (its providers: " + listed +
         "), and the CUDA EP library the anchors attach " + kCpuCoreUnderCudaEp + ". Install onnxruntime-gpu 1.29 for " + python +
         ", or give bench --python an interpreter that has it";
}

std::string explain_anchor_failure(const std::string& error, const std::string& python) {
  if (!crashed(error)) return error;
  static std::mutex mutex;
  static std::map<std::string, std::vector<std::string>> providers_of;  // by interpreter: asked once
  std::vector<std::string> providers;
  {
    std::lock_guard lock(mutex);
    auto known = providers_of.find(python);
    if (known == providers_of.end()) {
      const auto probe = run_child({python, "-c", "import onnxruntime; print(' '.join(onnxruntime.get_available_providers()))"}, {}, "", 120);
      std::istringstream words(probe.exit_code == 0 ? probe.stdout_text : std::string());
      std::vector<std::string> found;
      for (std::string word; words >> word;) found.push_back(word);
      known = providers_of.emplace(python, std::move(found)).first;
    }
    providers = known->second;
  }
  const std::string cause = anchor_crash_cause(error, python, providers);
  return cause.empty() ? error : error + "; " + cause;
}

}  // namespace ortfleet::detail
