#pragma once
// Every ORTFLEET_* environment variable ortfleet's programs read, in one table: its name, what it means and
// who reads it. Readers go through it (env_value(EnvVar::...)): a variable that is not in the table
// cannot be read, and docs/environment.md lists the table (tests/base/test_environment.cpp keeps the two,
// and the sources, in step). The table is header-only so that libortfleet_cudnn.so (src/preload/), which
// links nothing of ortfleet's, takes its names from it too.
#include <array>
#include <cstddef>
#include <optional>
#include <string>

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
  count_,  // not a variable: how many there are
};

struct EnvironmentVariable {
  EnvVar id;
  const char* name;
  const char* meaning;
  const char* read_by;
};

inline constexpr std::array<EnvironmentVariable, static_cast<size_t>(EnvVar::count_)> kEnvironmentVariables = {{
    {EnvVar::cache, "ORTFLEET_CACHE",
     "The folder of this user's ortfleet files: the model cache (models/), cuDNN's record (cudnn-choices/), start records. "
     "Else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet; it must be private (made with mode 0700)",
     "the model cache, cuDNN's record, start records"},
    {EnvVar::cache_shared, "ORTFLEET_CACHE_SHARED",
     "A read-only layer of the model cache looked in first (a cluster file system, an image's layer), when the config names none",
     "the model cache"},
    {EnvVar::ort_lib, "ORTFLEET_ORT_LIB", "The libonnxruntime.so to load, when none is named explicitly", "the runtime's search"},
    {EnvVar::ort_root, "ORTFLEET_ORT_ROOT", "A folder whose lib/ holds libonnxruntime.so, searched after ORTFLEET_ORT_LIB",
     "the runtime's search"},
    {EnvVar::ort_log_level, "ORTFLEET_ORT_LOG_LEVEL",
     "The level of ONNX Runtime's own messages that are printed: verbose, info, warning (the default), error or fatal",
     "ONNX Runtime's log (the command line sets it to info at -vv)"},
    {EnvVar::cuda_ep, "ORTFLEET_CUDA_EP", "ONNX Runtime's CUDA EP library (libonnxruntime_providers_cuda.so), or the folder holding it",
     "the CUDA provider"},
    {EnvVar::cudnn_choices, "ORTFLEET_CUDNN_CHOICES",
     "The folder of cuDNN's record that GPU workers share (else cudnn-choices/ beside the model cache); 0 keeps no record",
     "GPU workers' environment, libortfleet_cudnn.so"},
    {EnvVar::worker, "ORTFLEET_WORKER", "The ortfleet-worker executable, when none is named (else the one beside this binary)",
     "worker processes"},
    {EnvVar::worker_ring, "ORTFLEET_WORKER_RING",
     "0: runs on worker processes go through the socket (a message and a memfd per run) instead of the request ring",
     "worker channels"},
    {EnvVar::worker_log_level, "ORTFLEET_WORKER_LOG_LEVEL", "Set by a parent in its workers: its log level, so that -v shows theirs too",
     "worker processes"},
    {EnvVar::worker_background, "ORTFLEET_WORKER_BACKGROUND",
     "Set by a parent to 1 in a worker nobody waits for (a cache entry made in the background): it lowers its CPU and I/O priority",
     "worker processes"},
    {EnvVar::park_trim, "ORTFLEET_PARK_TRIM",
     "What a pool's worker hands back before it parks, a list of arena, heap and stack (the default: all three), or none",
     "pool workers"},
    {EnvVar::warm_pool_idle, "ORTFLEET_WARM_POOL_IDLE",
     "Seconds the warm pool a start leaves behind waits with nobody attached before it exits; 0 leaves no pool "
     "(when the config says nothing)",
     "the fleet, the pool a start leaves"},
    {EnvVar::warm_pool_park, "ORTFLEET_WARM_POOL_PARK",
     "Seconds with nobody attached after which a warm pool parks its GPU workers; 0 never (when the config says nothing)",
     "the pool a start leaves"},
    {EnvVar::auto_pool, "ORTFLEET_AUTO_POOL", "0: the automatic strategy neither starts on a pool nor leaves one", "the fleet"},
    {EnvVar::spawn_ns, "ORTFLEET_SPAWN_NS", "Set by a parent in a child it spawns: when, on the monotonic clock, so that the child's "
     "timeline shows its process start", "worker processes, start reports"},
    {EnvVar::crash_fd, "ORTFLEET_CRASH_FD",
     "Set by a parent in a worker: the file descriptor a crash inside ONNX Runtime writes its line to", "the crash handler"},
    {EnvVar::crash_handler, "ORTFLEET_CRASH_HANDLER", "0: no handler for fatal signals, and no crash scopes (to measure their cost)",
     "the crash handler"},
    {EnvVar::ring_spin_us, "ORTFLEET_RING_SPIN_US",
     "How long a request ring's waiter polls before it sleeps, in microseconds (default: 2000 on 8 or more cores, else 0)",
     "request rings"},
    {EnvVar::web_dir, "ORTFLEET_WEB_DIR", "The folder holding echarts.min.js, which report pages inline", "ortfleet report"},
    {EnvVar::python_anchor, "ORTFLEET_PYTHON_ANCHOR", "bench's Python anchor script (onnxruntime_python.py)", "bench"},
    {EnvVar::test_worker_start_delay, "ORTFLEET_TEST_WORKER_START_DELAY",
     "Tests only: DEVICE=SECONDS makes that device's worker sleep before it handles a start", "worker processes"},
    {EnvVar::test_worker_init_delay, "ORTFLEET_TEST_WORKER_INIT_DELAY",
     "Tests only: DEVICE=SECONDS makes that device's worker sleep before it initialises", "worker processes"},
    {EnvVar::test_import_kill_at, "ORTFLEET_TEST_IMPORT_KILL_AT",
     "Tests only: staged or publishing kills a cache import at that point", "cache import"},
    {EnvVar::test_cudnn_device, "ORTFLEET_TEST_CUDNN_DEVICE",
     "Tests only: the GPU name libortfleet_cudnn.so files its record under, for a stand-in cuDNN without a GPU",
     "libortfleet_cudnn.so"},
}};

/// The name of `v` ("ORTFLEET_CACHE").
constexpr const char* env_name(EnvVar v) { return kEnvironmentVariables[static_cast<size_t>(v)].name; }

/// The value of `v` in this process's environment, or nothing when it is unset or empty.
std::optional<std::string> env_value(EnvVar v);

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
