#include "ortfleet/engine/runtime.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "engine/runtime/runtime.hpp"
#include "ortfleet/base/error.hpp"
#include "base/system_paths.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSetupHint =
    "Pass --ort-lib PATH (or set ORTFLEET_ORT_LIB) to a libonnxruntime.so of version 1.29 or newer, "
    "or run scripts/fetch-onnxruntime.sh";

/// The runtime's library file inside a folder: libonnxruntime.so, .so.1, or the newest .so.1.x.y.
std::optional<fs::path> library_in(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"libonnxruntime.so", "libonnxruntime.so.1"}) {
    if (fs::exists(dir / name, ec)) return dir / name;
  }
  std::vector<fs::path> versioned;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("libonnxruntime.so.", 0) == 0) versioned.push_back(entry.path());
  }
  if (versioned.empty()) return std::nullopt;
  std::sort(versioned.begin(), versioned.end());
  return versioned.back();
}

void add_folder(std::vector<RuntimeCandidate>& out, const fs::path& dir, const std::string& source, bool explicit_choice) {
  std::error_code ec;
  if (auto lib = library_in(dir)) {
    out.push_back({lib->string(), source, true, explicit_choice});
  } else if (explicit_choice || fs::is_directory(dir, ec)) {
    out.push_back({(dir / "libonnxruntime.so").string(), source, false, explicit_choice});
  }
}

void add_path(std::vector<RuntimeCandidate>& out, const std::string& path, const std::string& source) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    add_folder(out, path, source, true);
  } else {
    out.push_back({path, source, fs::exists(path, ec), true});
  }
}

struct LoadedRuntime {
  RuntimeInfo info;
  const OrtApiBase* api_base = nullptr;
};

std::mutex g_mutex;
LoadedRuntime* g_loaded = nullptr;  // set once, never freed: the runtime stays loaded for the process

std::pair<int, int> major_minor(const std::string& version) {
  int major = 0;
  int minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) < 2) return {0, 0};
  return {major, minor};
}

LoadedRuntime* open_runtime(const RuntimeCandidate& candidate) {
  if (!candidate.exists) {
    throw Error("no ONNX Runtime library at " + candidate.path + " (from " + candidate.source + ")", kSetupHint);
  }
  {
    std::ifstream file(candidate.path, std::ios::binary);
    char magic[4] = {};
    file.read(magic, sizeof(magic));
    if (!file || std::memcmp(magic, "\x7f" "ELF", 4) != 0) {
      throw Error(candidate.path + " (from " + candidate.source + ") is not ONNX Runtime: it is not a shared library", kSetupHint);
    }
  }
  // RTLD_LOCAL: ONNX Runtime's symbols stay out of the global namespace, so a second copy loaded by
  // another component of the process (e.g. the onnxruntime Python package) cannot be confused with ours.
  void* handle = dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw Error("could not load " + candidate.path + " (from " + candidate.source + "): " + (reason ? reason : "unknown reason"),
                kSetupHint);
  }
  using GetApiBaseFn = const OrtApiBase* (*)();
  auto get_api_base = reinterpret_cast<GetApiBaseFn>(dlsym(handle, "OrtGetApiBase"));
  if (get_api_base == nullptr) {
    throw Error(candidate.path + " (from " + candidate.source + ") is not ONNX Runtime: it has no OrtGetApiBase symbol",
                kSetupHint);
  }
  const OrtApiBase* base = get_api_base();
  const std::string version = base->GetVersionString();
  auto [major, minor] = major_minor(version);
  if (major < 1 || (major == 1 && minor < kOldestSupportedOrtMinor)) {
    throw Error("ONNX Runtime " + version + " at " + candidate.path + " is too old: ortfleet needs 1." +
                    std::to_string(kOldestSupportedOrtMinor) + " or newer",
                kSetupHint);
  }
  const OrtApi* api = base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    throw Error("ONNX Runtime " + version + " at " + candidate.path + " does not offer API version " +
                    std::to_string(ORT_API_VERSION),
                kSetupHint);
  }
  Ort::InitApi(api);

  auto* loaded = new LoadedRuntime{};
  loaded->api_base = base;
  loaded->info.library_path = fs::weakly_canonical(candidate.path).string();
  loaded->info.source = candidate.source;
  loaded->info.version = version;
  loaded->info.build_info = Ort::GetBuildInfoString();
  loaded->info.providers = Ort::GetAvailableProviders();
  return loaded;
}

}  // namespace

std::vector<RuntimeCandidate> runtime_candidates(const std::string& explicit_library) {
  std::vector<RuntimeCandidate> out;
  if (!explicit_library.empty()) add_path(out, explicit_library, "--ort-lib");
  if (auto v = detail::env_var("ORTFLEET_ORT_LIB")) add_path(out, *v, "ORTFLEET_ORT_LIB");
  if (auto v = detail::env_var("ORTFLEET_ORT_ROOT")) add_folder(out, fs::path(*v) / "lib", "ORTFLEET_ORT_ROOT", true);
  if (const auto fetched = detail::fetched_ort_dir(); !fetched.empty()) {
    add_folder(out, fetched / "lib", "fetched by scripts/fetch-onnxruntime.sh", false);
  }
  const fs::path here = detail::own_binary_dir();
  add_folder(out, here / ".." / "lib" / "onnxruntime", "installed next to ortfleet", false);
  for (const auto& site : detail::python_package_dirs()) {
    std::error_code ec;
    const fs::path capi = site / "onnxruntime" / "capi";
    if (fs::is_directory(capi, ec)) add_folder(out, capi, "Python package onnxruntime in " + site.string(), false);
  }
  return out;
}

const RuntimeInfo& load_runtime(const std::string& explicit_library) {
  std::lock_guard lock(g_mutex);
  const auto candidates = runtime_candidates(explicit_library);
  if (g_loaded != nullptr) {
    std::error_code ec;
    if (!explicit_library.empty() && !candidates.empty() &&
        fs::weakly_canonical(candidates.front().path, ec).string() != g_loaded->info.library_path) {
      throw Error("ONNX Runtime is already loaded from " + g_loaded->info.library_path + "; cannot switch to " +
                      candidates.front().path + " in the same process",
                  "Start a new process to use another ONNX Runtime");
    }
    return g_loaded->info;
  }
  for (const auto& candidate : candidates) {
    // A location the user named must work; default locations are skipped when absent.
    if (!candidate.exists && !candidate.explicit_choice) continue;
    g_loaded = open_runtime(candidate);
    spdlog::debug("ONNX Runtime {} from {} ({})", g_loaded->info.version, g_loaded->info.library_path, g_loaded->info.source);
    return g_loaded->info;
  }
  throw Error("no ONNX Runtime library found (looked in: --ort-lib, ORTFLEET_ORT_LIB, ORTFLEET_ORT_ROOT, " +
                  (detail::fetched_ort_dir() / "lib").string() + ", Python onnxruntime packages)",
              kSetupHint);
}

const RuntimeInfo* loaded_runtime() noexcept {
  std::lock_guard lock(g_mutex);
  return g_loaded != nullptr ? &g_loaded->info : nullptr;
}

namespace detail {
const OrtApiBase& ort_api_base() {
  const RuntimeInfo* info = loaded_runtime();
  if (info == nullptr) throw Error("ONNX Runtime is not loaded yet", "Call ortfleet::load_runtime() first");
  return *g_loaded->api_base;
}
}  // namespace detail

}  // namespace ortfleet
