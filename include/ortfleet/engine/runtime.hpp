#pragma once
// The ONNX Runtime library, chosen and loaded at run time with dlopen, so that one ortfleet build
// works with whichever ONNX Runtime >= 1.29 the user has (the npm copy the set-up fetched, an
// official release folder, or the onnxruntime/capi folder of a Python onnxruntime(-gpu) package).
#include <string>
#include <vector>

namespace ortfleet {

inline constexpr int kOldestSupportedOrtMinor = 29;  // ONNX Runtime 1.29: plugin EPs, API 29

/// One place the runtime may be, in search order.
struct RuntimeCandidate {
  std::string path;    ///< the library file (or the folder it was expected in when missing)
  std::string source;  ///< how it was found: "`ort_library`" (the setting), "ORTFLEET_ORT_LIB", "ORTFLEET_ORT_ROOT", ...
  bool exists = false;
  bool explicit_choice = false;  ///< the user named it; failing to load it is an error, not a skip
};

struct RuntimeInfo {
  std::string library_path;
  std::string source;
  std::string version;      ///< "1.29.0"
  std::string build_info;
  std::vector<std::string> providers;  ///< GetAvailableProviders(): providers built into this runtime
};

/// The search order: the `ort_library` setting (explicit_library), $ORTFLEET_ORT_LIB, $ORTFLEET_ORT_ROOT/lib,
/// a copy found relative to the binary (lib/onnxruntime beside the Python extension, or beside bin/ of
/// the executables: an installed prefix, a build tree, which stages the fetched copy there, and the
/// Python package carry the one they were built with), the copy the set-up fetched (.deps/onnxruntime
/// of the checkout the build was configured in), Python onnxruntime packages found on this system,
/// then $LD_LIBRARY_PATH and the system's library folders.
std::vector<RuntimeCandidate> runtime_candidates(const std::string& explicit_library = {});

/// What the runtime's errors tell a user to do to choose a library: the `ort_library` setting (each front
/// end says it in its words: ortfleet/base/settings.hpp), ORTFLEET_ORT_LIB, or installing one.
std::string runtime_choice_hint();

/// Throws ortfleet::Error, as load_runtime() would, when `candidate` is missing or is not a shared
/// library; loads nothing (a warm pool's client checks the runtime its start names this way).
void check_runtime_candidate(const RuntimeCandidate& candidate);

/// Loads the first usable candidate once per process (later calls return the same runtime; a call
/// naming a different library than the loaded one throws). Throws ortfleet::Error when the library
/// is missing, is not ONNX Runtime, or is older than 1.29.
const RuntimeInfo& load_runtime(const std::string& explicit_library = {});

/// The loaded runtime, or nullptr before load_runtime().
const RuntimeInfo* loaded_runtime() noexcept;

/// ONNX Runtime's own switch for its telemetry, which ortfleet sets to "1" in its process before it
/// loads the runtime (and so in every process it starts): builds with Microsoft's uploader then neither
/// send events nor leave /tmp/mat-debug-<pid>.log, /tmp/.ses or ~/.cache/Microsoft/DeveloperTools behind.
inline constexpr const char* kOrtTelemetryVariable = "ORT_DISABLE_TELEMETRY";

/// ONNX Runtime's telemetry in this process, as `ortfleet doctor` reports it.
struct RuntimeTelemetry {
  bool uploader = false;  ///< the loaded library carries Microsoft's telemetry uploader (1DS)
  bool collects = false;  ///< and it runs in this process
  std::string evidence;   ///< why, in words
};
/// Makes this process's ONNX Runtime environment (where the runtime decides) and tells whether its
/// telemetry runs; load_runtime() first. Reads the library file once (tens of milliseconds).
RuntimeTelemetry runtime_telemetry();

}  // namespace ortfleet
