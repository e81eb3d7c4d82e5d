#include "engine/cuda/cudnn_choices.hpp"

#include <dlfcn.h>

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/system_paths.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
constexpr const char* kLibrary = "libortfleet_cudnn.so";
}  // namespace

std::map<std::string, std::string> cudnn_choices_environment(const std::string& executable) {
  const auto setting = env_value(EnvVar::cudnn_choices);
  if (setting && *setting == "0") return {};
  std::error_code ec;
  const fs::path library = fs::path(executable).parent_path() / kLibrary;
  if (!fs::is_regular_file(library, ec)) return {};
  std::string store;
  if (setting && !setting->empty()) {
    store = *setting;
  } else if (const auto root = user_cache_root()) {
    store = (fs::path(*root) / "cudnn-choices").string();
  } else {
    return {};
  }
  try {
    ensure_private_dir(store, "Set ORTFLEET_CUDNN_CHOICES to a folder only you can write, or to 0");
  } catch (const std::exception& e) {
    spdlog::debug("cuDNN's choices are not kept: {}", e.what());
    return {};
  }
  const auto preload = env_var("LD_PRELOAD");
  return {{"LD_PRELOAD", library.string() + (preload && !preload->empty() ? ":" + *preload : "")}, {env_name(EnvVar::cudnn_choices), store}};
}

std::optional<CudnnWork> cudnn_work() {
  using Report = int (*)(char*, int);
  static const auto report = reinterpret_cast<Report>(dlsym(RTLD_DEFAULT, "ortfleet_cudnn_report"));
  if (report == nullptr) return std::nullopt;
  char text[1024] = {};
  report(text, sizeof text);
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto ms = [&](const char* key) { return static_cast<double>(j.value(key, int64_t{0})) / 1e6; };
  CudnnWork w;
  w.heuristics_ms = ms("heuristics_ns");
  w.engine_configs_ms = ms("engine_configs_ns");
  w.plan_build_ms = ms("plan_build_ns");
  w.execute_ms = ms("execute_ns");
  w.queries = j.value("queries", int64_t{0});
  w.replayed = j.value("replayed", int64_t{0});
  w.refused = j.value("refused", int64_t{0});
  w.recorded = j.value("recorded", int64_t{0});
  return w;
}

CudnnWork operator-(const CudnnWork& a, const CudnnWork& b) {
  CudnnWork d;
  d.heuristics_ms = a.heuristics_ms - b.heuristics_ms;
  d.engine_configs_ms = a.engine_configs_ms - b.engine_configs_ms;
  d.plan_build_ms = a.plan_build_ms - b.plan_build_ms;
  d.execute_ms = a.execute_ms - b.execute_ms;
  d.queries = a.queries - b.queries;
  d.replayed = a.replayed - b.replayed;
  d.refused = a.refused - b.refused;
  d.recorded = a.recorded - b.recorded;
  return d;
}

}  // namespace ortfleet::detail
