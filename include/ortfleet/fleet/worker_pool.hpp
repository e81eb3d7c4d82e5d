#pragma once
// A warm worker pool: per device a worker process that has loaded ONNX Runtime and the CUDA EP, run
// cuInit and made its context, and waits for models. A Fleet started on a pool only creates and warms
// up its sessions; a session the pool already holds for the same model and settings is handed over
// at once ("resident"). The pool lives in this process (WorkerPool) or in a node-local daemon
// (`ortfleet serve`, pool_server.hpp) that keeps it across jobs.
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {
namespace detail {
class WorkerProcess;
struct AdoptedWorker;
}

struct PoolOptions {
  std::vector<Device> devices;     ///< empty: every GPU, else one CPU worker
  std::string ort_library;         ///< the ONNX Runtime the workers load; empty: the one this process would
  std::string worker_executable;   ///< ortfleet-worker; empty: found next to this binary or via $ORTFLEET_WORKER
  RunConfig config;                ///< CUDA settings applied before cuInit (module loading, connections)
  /// Each worker sees only its own GPU (CUDA_VISIBLE_DEVICES): its cuInit sets up one GPU, not all.
  bool narrow_workers = true;
  /// On a GPU, also pay cuDNN's and cuBLAS's first use (library loads, handles, common kernels: a few
  /// hundred ms of a process's first session) with two small throwaway models while the pool starts.
  bool prime_libraries = true;
  /// Sessions a worker keeps that nobody holds (least recently used go first); 0: the worker's default.
  size_t max_resident_sessions = 0;
  double start_timeout_s = 10 * 60;  ///< how long a worker may take to initialise
  /// A model new to the pool makes its first session and runs its first inference where no other job's
  /// session lives: the device's shared worker while it holds nothing, else a spare kept for it (or,
  /// while the spare is busy, a worker of its own). A crash inside ONNX Runtime then ends only that
  /// job's start. Once the model has run, its sessions join the shared worker (consolidate()), so that an
  /// idle device keeps at most two worker processes. Off: every start goes to the shared worker.
  bool isolate_new_models = true;
  /// Before a worker parks, a session nobody holds whose model cache entry holds more than this many
  /// bytes is dropped (uploading large weights again from the entry beats the driver's restore of them):
  /// made again from the entry when a job's client says it comes (restore_ahead), or by its next start. 0: never.
  uint64_t unload_above_bytes = 2'000'000'000;
};

struct PoolWorkerStatus {
  Device device;
  std::string state;          ///< "starting", "ready", "failed"
  std::string error;          ///< one line, when failed
  int pid = 0;
  std::string visible_devices;  ///< the worker's CUDA_VISIBLE_DEVICES; empty: not narrowed
  double ready_ms = 0;        ///< from the pool's start until the worker was initialised
  int restarts = 0;           ///< times a dead worker was started again
};

/// What one round of parking did (WorkerPool::park_workers).
struct ParkOutcome {
  size_t parked = 0;              ///< workers whose GPU state the driver now holds in host memory
  std::vector<std::string> kept;  ///< "cuda:0 (pid 812): why it stays", per worker that did not park
  double wall_ms = 0;             ///< all of them, parked at once
};

class WorkerPool {
 public:
  /// Spawns and initialises a worker per device in the background, and returns at once.
  explicit WorkerPool(PoolOptions options);
  ~WorkerPool();  ///< stops every worker
  /// Ends every worker now, whatever it is doing, those still starting too (SIGTERM, then SIGKILL after
  /// `grace_s`, all at once), and starts no other: a pool told to stop does not wait on a worker busy
  /// with a start or run for hours. Requests waiting on a worker then fail at once.
  void end_workers(double grace_s);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Blocks until every worker is initialised or failed (at most `timeout_s`); true when all are ready.
  bool wait(double timeout_s = std::numeric_limits<double>::infinity());
  const std::vector<Device>& devices() const;
  /// The options as the pool decided them once: its devices, and the worker executable and ONNX Runtime
  /// library found for every worker it starts.
  const PoolOptions& options() const;
  std::vector<PoolWorkerStatus> status() const;
  /// Every worker, as JSON: {"devices": [{device, role (shared, spare, extra), state, pid, parked,
  /// sessions: [...], gpu_memory_bytes (its own, from NVML; null where NVML cannot tell), host_pss_bytes,
  /// host_rss_bytes}], "total": {workers, gpu_memory_bytes, host_pss_bytes}}. Answers within a second
  /// whatever the workers do: one that does not answer in time shows what it said last ("answered": false).
  std::string status_json() const;
  /// Drops every session nobody holds; how many.
  size_t evict();
  /// Keeps each device's workers as they should be: a dead shared worker replaced (its spare takes its
  /// place when it holds nothing), a spare started while the shared worker holds sessions, a spare
  /// stopped while it holds none, dead workers forgotten. Returns how many shared workers were replaced.
  int keep_up();
  /// Folds in what jobs left on a device's spare and extra workers: sessions no job holds move into the
  /// shared worker (or the worker holding them becomes the shared one, when that holds nothing), then
  /// the spare holds nothing again and extra workers end. For an idle pool, before it parks. Returns how
  /// many extra workers ended.
  size_t consolidate();

  /// The initialised worker a start of `model` on `device` goes to (restored first if it was parked):
  /// where its sessions are resident, else the shared worker; for a model new to the pool, a worker where
  /// no other job's session lives (PoolOptions::isolate_new_models). Waits for it at most `timeout_s`; a
  /// dead worker is replaced first. The caller reports how the start went: start_succeeded or
  /// start_failed. Throws ortfleet::Error when the device is not in the pool, its worker failed, or the
  /// model crashed ONNX Runtime on this machine before (until the model file changes), with the crash's line.
  std::shared_ptr<detail::WorkerProcess> worker_for(const Device& device, const std::string& model, double timeout_s);
  /// A start of `model` on `worker` (from worker_for) made its session and ran: the model is proven, and
  /// its later starts on that device go where its sessions are.
  void start_succeeded(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model);
  /// A start of `model` on `worker` (from worker_for) failed: an extra worker that holds nothing else is
  /// stopped, so that a failed start leaves nothing running.
  void start_failed(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model, const Device& device);

  /// Takes over a worker another process spawned (a job's own, handed over as the job ends), with its
  /// resident session of `model`: later starts of the model on its device find that session. Its output
  /// goes to `log_fd` from now on. Throws ortfleet::Error when its device is not in this pool or it does
  /// not answer.
  void adopt(detail::AdoptedWorker worker, const std::string& model, int log_fd);

  /// A job is about to end worker `pid` of this pool (its run on it missed its deadline, `why` says so):
  /// the worker's death is logged as that, not as a crash or the out-of-memory killer. The pool server
  /// calls this when a job tells it.
  void note_ended_by_client(int pid, const std::string& why);

  /// Parks every worker that can (ortfleet/fleet/pool_server.hpp, ServeOptions::park_after_s): each first
  /// hands back what no session needs (the worker's "trim"), then its GPU state moves into its host memory
  /// and the GPU's memory is released; a worker is restored before it is handed out again.
  /// `lock_timeout_s`: how long the GPU work a worker has submitted may take. `still_idle`, asked right
  /// before each worker parks: false keeps it unparked (a job arrived meanwhile). A worker a start
  /// claimed since it was chosen never parks; one claimed while it parks is restored before use.
  ParkOutcome park_workers(double lock_timeout_s = 10, const std::function<bool()>& still_idle = {});

  /// A job's client says it will use `devices` (and `model`, where not empty): their parked workers are
  /// restored now, in the background, while the job still starts, and a model unloaded before parking
  /// is made again; no worker of those devices parks until the next park_workers() round after this.
  /// Returns at once; devices not in the pool are passed over.
  void restore_ahead(const std::vector<Device>& devices, const std::string& model);

  /// Sessions nobody holds that were made from the model itself (a job's own worker, handed over) are
  /// made again from the model's cache entry where it has one now (a session from the entry holds
  /// less: no optimisation's leftovers). For an idle pool, before it parks. Returns how many.
  size_t remake_from_cache_entries();

  /// Every session the workers hold, with the plan it started with (paths absolute) and how long it
  /// has been unused: what a node daemon remembers. Workers parked or busy are passed over.
  struct ResidentPlan {
    Device device;
    std::string plan_json;
    double idle_s = 0;
  };
  std::vector<ResidentPlan> resident_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
