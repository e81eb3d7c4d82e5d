#pragma once
// A warm worker pool: per device a worker process that has loaded ONNX Runtime and the CUDA EP, run
// cuInit and made its context, and waits for models. A Fleet started on a pool only creates and warms
// up its sessions; a session the pool already holds for the same model and settings is handed over
// at once ("resident"). The pool lives in this process (WorkerPool) or in a node-local daemon
// (`ortfleet serve`, pool_server.hpp) that keeps it across jobs.
#include <cstddef>
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
  /// A model new to the pool makes its first session and runs its first inference in a spare worker
  /// of its own (one kept warm per device, then replaced), never in the worker whose sessions other
  /// jobs hold: a crash inside ONNX Runtime then ends only that job's start. Costs a second warm
  /// worker per device (a CUDA context's memory on each GPU).
  bool isolate_new_models = true;
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
  const PoolOptions& options() const;
  std::vector<PoolWorkerStatus> status() const;
  /// Every worker's sessions and memory, as JSON: {"devices": [{device, pid, state, sessions: [...]}]}.
  std::string status_json() const;
  /// Drops every session nobody holds; how many.
  size_t evict();
  /// Starts again every worker that died (their clients have had their error). Returns how many.
  int restart_dead_workers();

  /// The initialised worker of `device`, waiting for it at most `timeout_s`; a worker found dead is
  /// started again first. Throws ortfleet::Error when the device is not in the pool or its worker failed.
  std::shared_ptr<detail::WorkerProcess> worker(const Device& device, double timeout_s);
  /// The worker a start of `model` on `device` goes to: the shared worker once the model has run in
  /// this pool; before that (options.isolate_new_models), a spare worker of its own, which keeps the
  /// model's sessions while a new spare warms up. Throws ortfleet::Error, with the crash's line, for a
  /// model that crashed ONNX Runtime on this machine before (until the model file changes).
  std::shared_ptr<detail::WorkerProcess> worker_for(const Device& device, const std::string& model, double timeout_s);
  /// `model` made its sessions and ran: its later starts share the device's worker.
  void mark_proven(const std::string& model);
  /// A start of `model` on `worker` (from worker_for) failed: a worker of its own that holds nothing
  /// else is stopped, so that a failed start leaves nothing running.
  void start_failed(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model, const Device& device);

  /// Takes over a worker another process spawned (a job's own, handed over as the job ends), with its
  /// resident session of `model`: later starts of the model on its device find that session. Its output
  /// goes to `log_fd` from now on. Throws ortfleet::Error when its device is not in this pool or it does
  /// not answer.
  void adopt(detail::AdoptedWorker worker, const std::string& model, int log_fd);

  /// Parks every worker that can (ortfleet/fleet/pool_server.hpp, ServeOptions::park_after_s): its GPU
  /// state moves into its host memory and the GPU's memory is released; a worker is restored before it
  /// is handed out again. `lock_timeout_s`: how long the GPU work a worker has submitted may take.
  ParkOutcome park_workers(double lock_timeout_s = 10);
  /// How many workers are parked now.
  size_t parked_workers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
