#pragma once
// Every ORTFLEET_* environment variable ortfleet's programs read, in one table: its name, the setting it
// gives (a row of the settings table, ortfleet/base/settings.hpp, whose check its value passes), what it
// means and who reads it. Readers go through it (env_value(EnvVar::...)): a variable that is not in the
// table cannot be read, and every value read is checked: a bad one is refused in one line naming it, or,
// for a setting that cannot fail a job, warned about once and left out. Names of ORTFLEET_ that neither
// this table nor the set-up's and tests' (kOtherVariables) list are warned about once (check_environment).
// docs/environment.md lists both tables (tests/base/test_environment.cpp keeps them, and the sources, in
// step). The tables are header-only so that libortfleet_cudnn.so (src/preload/), which links nothing of
// ortfleet's, takes its names from them too.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ortfleet::detail {

enum class EnvVar {
  cache,
  cache_shared,
  ort_lib,
  ort_root,
  ort_log_level,
  cuda_ep,
  cudnn_choices,
  worker,
  worker_ring,
  worker_log_level,
  worker_background,
  park_trim,
  warm_pool_idle,
  warm_pool_park,
  auto_pool,
  spawn_ns,
  crash_fd,
  crash_handler,
  ring_spin_us,
  web_dir,
  python_anchor,
  test_worker_start_delay,
  test_worker_init_delay,
  test_import_kill_at,
  test_cudnn_device,
  test_tier_disagree,
  test_park_cpu,
  count_,  // not a variable: how many there are
};

struct EnvironmentVariable {
  EnvVar id;
  const char* name;
  const char* setting;  ///< the library name of the setting it gives (settings.hpp): its check, and whether a bad value is refused
  const char* meaning;
  const char* read_by;
};

inline constexpr std::array<EnvironmentVariable, static_cast<size_t>(EnvVar::count_)> kEnvironmentVariables = {{
    {EnvVar::cache, "ORTFLEET_CACHE", "cache_root",
     "The folder of this user's ortfleet files: the model cache (models/), cuDNN's record (cudnn-choices/), start records. "
     "Else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet; it must be private (made with mode 0700)",
     "the model cache, cuDNN's record, start records"},
    {EnvVar::cache_shared, "ORTFLEET_CACHE_SHARED", "session.model_cache_shared",
     "A read-only layer of the model cache looked in first (a cluster file system, an image's layer), when the config names none",
     "the model cache"},
    {EnvVar::ort_lib, "ORTFLEET_ORT_LIB", "ort_library", "The libonnxruntime.so to load, when none is named explicitly", "the runtime's search"},
    {EnvVar::ort_root, "ORTFLEET_ORT_ROOT", "ort_root", "A folder whose lib/ holds libonnxruntime.so, searched after ORTFLEET_ORT_LIB",
     "the runtime's search"},
    {EnvVar::ort_log_level, "ORTFLEET_ORT_LOG_LEVEL", "ort_log_level",
     "The level of ONNX Runtime's own messages that are printed: verbose, info, warning (the default), error or fatal",
     "ONNX Runtime's log (the command line sets it to info at -vv)"},
    {EnvVar::cuda_ep, "ORTFLEET_CUDA_EP", "cuda_ep", "ONNX Runtime's CUDA EP library (libonnxruntime_providers_cuda.so), or the folder holding it",
     "the CUDA provider"},
    {EnvVar::cudnn_choices, "ORTFLEET_CUDNN_CHOICES", "cudnn_choices",
     "The folder of cuDNN's record that GPU workers share (else cudnn-choices/ beside the model cache); 0 keeps no record",
     "GPU workers' environment, libortfleet_cudnn.so"},
    {EnvVar::worker, "ORTFLEET_WORKER", "worker_executable", "The ortfleet-worker executable, when none is named (else the one beside this binary)",
     "worker processes"},
    {EnvVar::worker_ring, "ORTFLEET_WORKER_RING", "request_ring",
     "0: runs on worker processes go through the socket (a message and a memfd per run) instead of the request ring",
     "worker channels"},
    {EnvVar::worker_log_level, "ORTFLEET_WORKER_LOG_LEVEL", "worker_log_level", "Set by a parent in its workers: its log level, so that -v shows theirs too",
     "worker processes"},
    {EnvVar::worker_background, "ORTFLEET_WORKER_BACKGROUND", "worker_background",
     "Set by a parent to 1 in a worker nobody waits for (a cache entry made in the background): it lowers its CPU and I/O priority",
     "worker processes"},
    {EnvVar::park_trim, "ORTFLEET_PARK_TRIM", "park_trim",
     "What a pool's worker hands back before it parks, a list of arena, heap and stack (the default: all three), or none",
     "pool workers"},
    {EnvVar::warm_pool_idle, "ORTFLEET_WARM_POOL_IDLE", "warm_pool.idle_exit_s",
     "Seconds the warm pool a start leaves behind waits with nobody attached before it exits; 0 leaves no pool "
     "(when the config says nothing)",
     "the fleet, the pool a start leaves"},
    {EnvVar::warm_pool_park, "ORTFLEET_WARM_POOL_PARK", "warm_pool.park_after_s",
     "Seconds with nobody attached after which a warm pool parks its GPU workers; 0 never (when the config says nothing)",
     "the pool a start leaves"},
    {EnvVar::auto_pool, "ORTFLEET_AUTO_POOL", "auto_pool", "0: the automatic strategy neither starts on a pool nor leaves one", "the fleet"},
    {EnvVar::spawn_ns, "ORTFLEET_SPAWN_NS", "spawn_ns", "Set by a parent in a child it spawns: when, on the monotonic clock, so that the child's "
     "timeline shows its process start", "worker processes, start reports"},
    {EnvVar::crash_fd, "ORTFLEET_CRASH_FD", "crash_fd",
     "Set by a parent in a worker: the file descriptor a crash inside ONNX Runtime writes its line to", "the crash handler"},
    {EnvVar::crash_handler, "ORTFLEET_CRASH_HANDLER", "crash_handler", "0: no handler for fatal signals, and no crash scopes (to measure their cost)",
     "the crash handler"},
    {EnvVar::ring_spin_us, "ORTFLEET_RING_SPIN_US", "ring_spin_us",
     "How long a request ring's waiter polls before it sleeps, in microseconds (default: 2000 on 8 or more cores, else 0)",
     "request rings"},
    {EnvVar::web_dir, "ORTFLEET_WEB_DIR", "web_dir", "The folder holding echarts.min.js, which report pages inline", "ortfleet report"},
    {EnvVar::python_anchor, "ORTFLEET_PYTHON_ANCHOR", "python_anchor", "bench's Python anchor script (onnxruntime_python.py)", "bench"},
    {EnvVar::test_worker_start_delay, "ORTFLEET_TEST_WORKER_START_DELAY", "test_worker_start_delay",
     "Tests only: DEVICE=SECONDS makes that device's worker sleep before it handles a start", "worker processes"},
    {EnvVar::test_worker_init_delay, "ORTFLEET_TEST_WORKER_INIT_DELAY", "test_worker_init_delay",
     "Tests only: DEVICE=SECONDS makes that device's worker sleep before it initialises", "worker processes"},
    {EnvVar::test_import_kill_at, "ORTFLEET_TEST_IMPORT_KILL_AT", "test_import_kill_at",
     "Tests only: staged or publishing kills a cache import at that point", "cache import"},
    {EnvVar::test_cudnn_device, "ORTFLEET_TEST_CUDNN_DEVICE", "test_cudnn_device",
     "Tests only: the GPU name libortfleet_cudnn.so files its record under, for a stand-in cuDNN without a GPU",
     "libortfleet_cudnn.so"},
    {EnvVar::test_tier_disagree, "ORTFLEET_TEST_TIER_DISAGREE", "test_tier_disagree",
     "Tests only: 1 makes a tiered start's full session disagree with the quick one (its switch refused)", "sessions"},
    {EnvVar::test_park_cpu, "ORTFLEET_TEST_PARK_CPU", "test_park_cpu",
     "Tests only: 1 makes a pool's CPU workers park (stopped by SIGSTOP, continued on restore), as GPU workers park", "warm pools"},
}};

/// Names of ORTFLEET_ that the set-up, the build's scripts and the tests read, and no program of
/// ortfleet's: known, so never warned about, and never read through env_value.
struct OtherVariable {
  const char* name;
  const char* meaning;
};
inline constexpr std::array<OtherVariable, 14> kOtherVariables = {{
    {"ORTFLEET_GPU", "1: `scripts/bootstrap.sh` also fetches ONNX Runtime's CUDA provider"},
    {"ORTFLEET_ORT_VERSION", "another ONNX Runtime version for `scripts/fetch-onnxruntime.sh`"},
    {"ORTFLEET_BUILD_DIR", "the build tree `pip install .` packs (python/build_backend), else build/release"},
    {"ORTFLEET_PREFIX", "an installed ortfleet `pip install .` compiles only the extension against"},
    {"ORTFLEET_FUZZ_ITERATIONS", "how many inputs the fuzz test mutates per target (docs/development.md)"},
    {"ORTFLEET_FUZZ_SEED", "where the fuzz test's mutations start (docs/development.md)"},
    {"ORTFLEET_FUZZ_TARGET", "the one target the fuzz test mutates"},
    {"ORTFLEET_REQUIRE_GPU", "1: the GPU tests fail, rather than skip, without a GPU"},
    {"ORTFLEET_TEST_BIN_DIR", "the folder of the built programs the tests run (on the GPU machine)"},
    {"ORTFLEET_TEST_CRASH", "how the tests' custom-op library crashes"},
    {"ORTFLEET_TEST_VALUE", "a value a test hands a child, to see it arrive"},
    {"ORTFLEET_TEST_MARK", "a mark a test puts on its children, to find them"},
    {"ORTFLEET_SHOW_EXAMPLE", "1: the Slurm tests print an example job's output"},
    {"ORTFLEET_CPU_CORE", "a root of ONNX Runtime's CPU-only core, which the GPU machine's staging (shared/device) exports for crash checks"},
}};

/// The name of `v` ("ORTFLEET_CACHE").
constexpr const char* env_name(EnvVar v) { return kEnvironmentVariables[static_cast<size_t>(v)].name; }

/// The value of `v` in this process's environment, or nothing when it is unset or empty; checked
/// against its setting's values (settings.hpp): a bad value of a setting that refuses one throws an
/// ortfleet::Error of one line naming the variable, the value and what it takes; a bad value of one
/// that warns is warned about once (the log) and read as unset, its default used.
std::optional<std::string> env_value(EnvVar v);
/// A number variable's value (its setting a whole number or a number), checked as env_value does.
std::optional<double> env_number(EnvVar v);
/// A 0-or-1 variable's value, checked as env_value does.
std::optional<bool> env_on(EnvVar v);
/// What is wrong with `value` for `v`, or "": "ORTFLEET_CACHE='abc' is a relative path: give an absolute path".
std::string env_problem(EnvVar v, const std::string& value);

/// The ORTFLEET_ names set in this process's environment that neither table lists.
std::vector<std::string> unknown_ortfleet_variables();

namespace environment_check {
constexpr bool in_order() {
  for (size_t i = 0; i < kEnvironmentVariables.size(); ++i) {
    if (static_cast<size_t>(kEnvironmentVariables[i].id) != i) return false;
  }
  return true;
}
static_assert(in_order(), "kEnvironmentVariables lists the variables in EnvVar's order, one row each");
}  // namespace environment_check

}  // namespace ortfleet::detail
