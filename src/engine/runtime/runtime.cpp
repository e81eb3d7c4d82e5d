#include "ortfleet/engine/runtime.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <optional>
#include <filesystem>
#include <mutex>

#include "base/crash_report.hpp"
#include "base/elf_file.hpp"
#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "engine/runtime/runtime.hpp"
#include "ortfleet/base/error.hpp"
#include "base/system_paths.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {

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

/// ONNX Runtime builds with Microsoft's telemetry uploader (1DS: the fetched 1.29 core has it) start it
/// when the process makes its first environment, and it then writes /tmp/mat-debug-<pid>.log (an empty
/// file per process, never removed), /tmp/.ses and a device id and event database under
/// ~/.cache/Microsoft/DeveloperTools/.onnxruntime, and sends events to Microsoft. The decision is taken
/// once per process, at that moment, from the environment: DisableTelemetryEvents, which needs an
/// environment, comes too late to stop any of it (strace of CreateEnv). ORT_DISABLE_TELEMETRY=1 is the
/// runtime's own switch: set before the library is loaded, so that it holds for every environment of
/// this process and of the processes it starts (workers, the warm pool).
/// Set once, when this library is loaded, before any thread (a pool's starter threads spawning workers
/// read the environment); later calls find it set and write nothing.
void keep_ort_telemetry_off() { detail::set_env_where_different(kOrtTelemetryVariable, "1"); }
namespace {
[[maybe_unused]] const bool kTelemetryOffAtLoad = (keep_ort_telemetry_off(), true);
}  // namespace

LoadedRuntime* open_runtime(const RuntimeCandidate& candidate) {
  const std::string hint = runtime_choice_hint();
  check_runtime_candidate(candidate);
  keep_ort_telemetry_off();
  // What a crash inside the loader or the library's initialisers prints: the library, not a model.
  install_crash_handler();
  const CrashScope loading(library_crash_text("ONNX Runtime", candidate.path));
  // RTLD_LOCAL: ONNX Runtime's symbols stay out of the global namespace, so a second copy loaded by
  // another component of the process (e.g. the onnxruntime Python package) cannot be confused with ours.
  void* handle = dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw Error("could not load " + candidate.path + " (from " + candidate.source + "): " + (reason ? reason : "unknown reason"),
                hint);
  }
  using GetApiBaseFn = const OrtApiBase* (*)();
  auto get_api_base = reinterpret_cast<GetApiBaseFn>(dlsym(handle, "OrtGetApiBase"));
  if (get_api_base == nullptr) {
    throw Error(candidate.path + " (from " + candidate.source + ") is not ONNX Runtime: it has no OrtGetApiBase symbol",
                hint);
  }
  const OrtApiBase* base = get_api_base();
  const std::string version = base->GetVersionString();
  auto [major, minor] = major_minor(version);
  if (major < 1 || (major == 1 && minor < kOldestSupportedOrtMinor)) {
    throw Error("ONNX Runtime " + version + " at " + candidate.path + " is too old: ortfleet needs 1." +
                    std::to_string(kOldestSupportedOrtMinor) + " or newer",
                hint);
  }
  const OrtApi* api = base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    throw Error("ONNX Runtime " + version + " at " + candidate.path + " does not offer API version " +
                    std::to_string(ORT_API_VERSION),
                hint);
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

namespace {
/// Where a runtime installed with ortfleet lies, relative to the binary holding this code: lib/onnxruntime
/// of the Python package (beside the extension), or of the prefix or build tree (beside bin/).
std::vector<fs::path> beside_this_binary() {
  const fs::path here = detail::own_binary_dir();
  return {here / "lib" / "onnxruntime", (here / ".." / "lib" / "onnxruntime").lexically_normal()};
}

/// The folders the system's loader searches, where a runtime installed system-wide lies
/// ($LD_LIBRARY_PATH, then the usual library folders). Only folders that hold one are candidates.
std::vector<fs::path> system_library_dirs() {
  std::vector<fs::path> dirs;
  if (auto v = detail::env_var("LD_LIBRARY_PATH")) {
    size_t start = 0;
    while (start <= v->size()) {
      const size_t end = std::min(v->find(':', start), v->size());
      if (end > start) dirs.emplace_back(v->substr(start, end - start));
      start = end + 1;
    }
  }
  for (const char* dir : {"/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"}) dirs.emplace_back(dir);
  return dirs;
}
}  // namespace

std::vector<RuntimeCandidate> runtime_candidates(const std::string& explicit_library) {
  std::vector<RuntimeCandidate> out;
  if (!explicit_library.empty()) add_path(out, explicit_library, named(Setting::ort_library));
  if (auto v = detail::env_value(detail::EnvVar::ort_lib)) add_path(out, *v, detail::env_name(detail::EnvVar::ort_lib));
  if (auto v = detail::env_value(detail::EnvVar::ort_root)) add_folder(out, fs::path(*v) / "lib", detail::env_name(detail::EnvVar::ort_root), true);
  // Relative to the binary, before the set-up's copy: an installed ortfleet, a build tree (which stages
  // the runtime beside bin/: cmake/OrtfleetRelocatable.cmake) or the Python package keeps the runtime
  // it was built with, wherever it is copied or moved and whatever becomes of the checkout's .deps/.
  for (const auto& dir : beside_this_binary()) add_folder(out, dir, "installed with ortfleet", false);
  if (const auto fetched = detail::fetched_ort_dir(); !fetched.empty()) {
    add_folder(out, fetched / "lib", "fetched by scripts/fetch-onnxruntime.sh", false);
  }
  for (const auto& site : detail::python_package_dirs()) {
    std::error_code ec;
    const fs::path capi = site / "onnxruntime" / "capi";
    if (fs::is_directory(capi, ec)) add_folder(out, capi, "Python package onnxruntime in " + site.string(), false);
  }
  for (const auto& dir : system_library_dirs()) {
    if (library_in(dir)) add_folder(out, dir, "the system's library folder " + dir.string(), false);
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
  std::string beside;
  for (const auto& dir : beside_this_binary()) beside += dir.string() + ", ";
  throw Error("no ONNX Runtime library found (looked in: " + named(Setting::ort_library) + ", ORTFLEET_ORT_LIB, ORTFLEET_ORT_ROOT, " + beside +
                  (detail::fetched_ort_dir() / "lib").string() + ", Python onnxruntime packages, $LD_LIBRARY_PATH and the system's library folders)",
              runtime_choice_hint());
}

void check_runtime_candidate(const RuntimeCandidate& candidate) {
  const std::string hint = runtime_choice_hint();
  if (!candidate.exists) {
    throw Error("no ONNX Runtime library at " + candidate.path + " (from " + candidate.source + ")", hint);
  }
  // dlopen trusts the file it maps, and a damaged one kills this process (a user's Python interpreter
  // too): the file is read as the loader will read it first, and refused unless it is whole and
  // exports OrtGetApiBase; nor is it loaded where another user could have changed it.
  try {
    detail::check_loadable_library(candidate.path, {"OrtGetApiBase"}, "the ONNX Runtime library", hint);
    detail::check_library_owners(candidate.path, "the ONNX Runtime library", hint);
  } catch (const Error& e) {
    std::string what = e.what_failed();  // "the ONNX Runtime library PATH ...": where the path came from, after it
    const auto at = what.find(candidate.path);
    what.insert(at == std::string::npos ? what.size() : at + candidate.path.size(), " (from " + candidate.source + ")");
    throw Error(what, e.hint());
  }
}

std::string runtime_choice_hint() {
  return "Pass " + named(Setting::ort_library, "PATH") + " (or set ORTFLEET_ORT_LIB) to a libonnxruntime.so of version 1.29 or newer, or install "
         "one where ortfleet looks: scripts/fetch-onnxruntime.sh in a checkout, pip install onnxruntime (1.29 or newer) for Python";
}

const RuntimeInfo* loaded_runtime() noexcept {
  std::lock_guard lock(g_mutex);
  return g_loaded != nullptr ? &g_loaded->info : nullptr;
}

namespace {
/// Whether the library file carries Microsoft's telemetry uploader: its collector's address.
bool carries_uploader(const std::string& library) {
  const detail::MappedFile file(library, /*populate=*/false, detail::Symlinks::follow);
  constexpr std::string_view kCollector = "events.data.microsoft.com";
  const auto* bytes = static_cast<const char*>(file.data());
  return std::search(bytes, bytes + file.size(), std::boyer_moore_horspool_searcher(kCollector.begin(), kCollector.end())) != bytes + file.size();
}
}  // namespace

RuntimeTelemetry runtime_telemetry() {
  const RuntimeInfo* info = loaded_runtime();
  if (info == nullptr) throw Error("ONNX Runtime is not loaded yet", "Call ortfleet::load_runtime() first");
  detail::ort_env();  // the runtime decides when its first environment is made
  RuntimeTelemetry t;
  t.uploader = carries_uploader(info->library_path);
  const std::string trace = "/tmp/mat-debug-" + std::to_string(::getpid()) + ".log";
  // Only a file this process wrote: /tmp keeps the logs of earlier processes, and pids come round again.
  t.collects = t.uploader && detail::written_since_this_process_started(trace);
  const char* setting = std::getenv(kOrtTelemetryVariable);
  const std::string set = std::string(kOrtTelemetryVariable) + "=" + (setting != nullptr ? setting : "(unset)");
  if (!t.uploader) {
    t.evidence = "this ONNX Runtime has no telemetry uploader (ortfleet turns its events off too: DisableTelemetryEvents)";
  } else if (t.collects) {
    t.evidence = "this ONNX Runtime carries Microsoft's telemetry uploader (1DS) and it runs in this process: it made " + trace + " (" + set +
                 " when it started)";
  } else {
    t.evidence = "this ONNX Runtime carries Microsoft's telemetry uploader (1DS); ortfleet keeps it off (" + set +
                 " before loading it): it made no " + trace + ", sends nothing and keeps no device id";
  }
  return t;
}

namespace detail {
const OrtApiBase& ort_api_base() {
  const RuntimeInfo* info = loaded_runtime();
  if (info == nullptr) throw Error("ONNX Runtime is not loaded yet", "Call ortfleet::load_runtime() first");
  return *g_loaded->api_base;
}
}  // namespace detail

}  // namespace ortfleet
