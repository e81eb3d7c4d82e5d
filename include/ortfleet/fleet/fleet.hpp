#pragma once
// The fleet: one model, one ready session per device, brought up as fast as the machine allows.
// "Ready" means created and warmed up on generated inputs, so that cuDNN's algorithm search and
// other first-run costs are paid at start-up, not by the first user request.
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/fleet/device_status.hpp"

namespace ortfleet {

class WorkerPool;

/// How the sessions are brought up.
enum class Strategy {
  sequential,  ///< one device after another, in this process (what a plain loop does)
  threads,     ///< one thread per device, in this process, nothing shared up front (the naive parallel start)
  processes,   ///< one worker process per device, each starting on its own (a multiprocessing pool)
  fleet,       ///< ours: library load, cuInit, GPU contexts and model read overlapped; tuned threads;
               ///< one worker process per GPU where GPUs would contend inside one process
  automatic,   ///< fleet, from what is measured where it is: a live `ortfleet serve` pool on the default
               ///< socket (FleetOptions::auto_pool), else for several GPUs workers or one process as this
               ///< machine's last bench record found faster (ortfleet/fleet/start_record.hpp)
};
std::string to_string(Strategy s);

/// Why a fleet starts the way it does (Fleet::strategy_why; Fleet::strategy_reason says it in words,
/// with the measurement it went by).
enum class StrategyWhy {
  as_asked,            ///< an explicit strategy
  on_pool,             ///< auto, on the pool given
  one_process_asked,   ///< auto, every GPU in this process as FleetOptions::one_process asked
  pool_answered,       ///< auto found the node's warm pool, serving every device asked for
  leaves_pool,         ///< auto found no pool: a worker process per device, for the pool this start leaves
  cpu,                 ///< auto on CPUs: one process
  record_one_process,  ///< auto on GPUs: this machine's bench record started them faster in one process
  record_workers,      ///< auto on GPUs: this machine's bench record started them faster in a worker process each
  one_gpu,             ///< auto on one GPU, no record: a worker process, where cuDNN's recorded choices apply
  several_gpus,        ///< auto on several GPUs, no record: a worker process each
  known_crash,         ///< auto: the model crashed ONNX Runtime here before, so a worker process per device contains it
};
/// Its name: "as_asked", "pool_answered", ... (a start report's "strategy_why").
const char* to_string(StrategyWhy why);
StrategyWhy parse_strategy_why(const std::string& name);
Strategy parse_strategy(const std::string& s);
const std::vector<Strategy>& all_strategies();  ///< the four concrete ones, in table order

struct FleetOptions {
  std::vector<Device> devices;       ///< empty: "all" (select_devices): every GPU, else one CPU session; under Slurm, what it gave
  Strategy strategy = Strategy::automatic;
  RunConfig config;
  int warmup_runs = 1;
  int64_t dynamic_dim = 1;           ///< value of dynamic dimensions in warm-up inputs
  std::string ort_library;           ///< --ort-lib, passed on to worker processes
  std::string worker_executable;     ///< ortfleet-worker; empty: found next to this binary or via $ORTFLEET_WORKER
  std::string cache_dir;             ///< optimised-model cache folder (config.session.optimized_model_cache)
  std::string profile_dir;           ///< non-empty: ONNX Runtime profiles per device are written here
  /// How long a device may take from start() to ready. A worker process that has not answered by then
  /// is killed and its device fails (the others go on); run() on a device still starting waits at most
  /// this long. Sessions in this process cannot be killed: for them it bounds the waits only.
  /// Two hours: some models take an hour to start (cuDNN's exhaustive algorithm search, huge graphs).
  double start_timeout_s = 2 * 60 * 60;
  /// How long one run() on a worker process may take; a worker that has not answered by then is killed
  /// and its device fails.
  double run_timeout_s = 10 * 60;
  /// Worker processes see only their own GPU (CUDA_VISIBLE_DEVICES): each cuInit sets up one GPU.
  bool narrow_workers = true;
  /// Strategy::fleet on GPUs: every session in this process, started overlapped on threads, instead of
  /// a worker process per GPU (bench's "fleet, one process" row; auto sets it when this machine's bench
  /// record found one process faster). On one GPU the worker's first inference replays cuDNN's recorded
  /// choices, which this process cannot.
  bool one_process = false;
  /// Start the sessions on this warm pool's workers (every device must be in it): no worker process,
  /// runtime load, cuInit or context is paid, and a session the pool holds already is handed over.
  std::shared_ptr<WorkerPool> pool;
  /// Or on the pool of the `ortfleet serve` daemon listening on this socket.
  std::string pool_socket;
  /// Neither given: start on this pool when it has every device asked for (all of its own when none
  /// is) and the strategy is auto or fleet, else as if there were none (the Python module's pool of
  /// ortfleet.prewarm()). Whether a pool is used at all is decided once, by the fleet, for every front end.
  std::shared_ptr<WorkerPool> preferred_pool;
  /// Strategy::automatic starts on the pool of an `ortfleet serve` daemon answering on the default
  /// socket (default_pool_socket()) when it serves every device asked for; where none answers, the
  /// start (cold) leaves one there once every device is ready, for the next job's start: a warm pool
  /// that exits after config.warm_pool's idle time (0: none is left). Off here, or with
  /// ORTFLEET_AUTO_POOL=0 in the environment: auto neither uses nor leaves a pool.
  bool auto_pool = true;
  /// Runs on worker processes go through a request ring in shared memory (true) or a socket message
  /// each (false: what `bench --inference` compares the ring with). Unset: the ring, unless
  /// ORTFLEET_WORKER_RING=0 is in the environment.
  std::optional<bool> request_ring;
  /// How the note of a warm pool left behind (Fleet::left_behind) says to leave none: by default the
  /// setting that does (a front end says it in its words, ortfleet/base/settings.hpp); a front end may
  /// give more of its own (the Python module: pool=False, ortfleet.pool_stop()).
  std::string no_warm_pool_advice = "ORTFLEET_WARM_POOL_IDLE=0 or `warm_pool.idle_exit_s=0` leaves none";
};

/// What a start left running for later starts once every device was done (Fleet::what_is_left).
struct LeftBehind {
  enum class Kind {
    warm_pool,    ///< the warm pool it left on the node (automatic strategy, FleetOptions::auto_pool)
    cache_entry,  ///< the model cache entry being made in the background
    nothing,      ///< it would have left one of those, and could not: the note says why
  };
  Kind kind = Kind::nothing;
  std::string socket;  ///< warm_pool: where it listens
  std::string log;     ///< warm_pool: its log
  std::string note;    ///< what it is, in words, for a person
};

class Fleet {
 public:
  Fleet(std::string model_path, FleetOptions options);
  ~Fleet();  ///< shuts down
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  /// Begins bringing every device to ready and returns at once. Failures stay per device.
  void start();
  /// Blocks until every device is ready or failed; true when all are ready.
  bool wait();
  /// The same, waiting at most `timeout_s`: false when some device is still starting then.
  bool wait(double timeout_s);
  bool ready(const Device& device) const;
  std::vector<DeviceStatus> status() const;
  const std::vector<Device>& devices() const;
  Strategy strategy() const;  ///< the strategy used (automatic resolved)
  /// Why this strategy: "as asked" for an explicit one; for auto, the measurement it went by (a live
  /// pool server, this machine's bench record) or else what the choice overlaps and where the sessions live.
  std::string strategy_reason() const;
  /// The same, typed: what a front end or a report reads.
  StrategyWhy strategy_why() const;
  /// Why these devices, when the fleet chose them ("all", FleetOptions::devices left empty) under a
  /// Slurm allocation: "the 2 GPUs Slurm gave job 123 (CUDA_VISIBLE_DEVICES=0,1)" (select_devices); "" otherwise.
  std::string devices_reason() const;

  /// Runs one inference on `device`. Host tensors, or GPU tensors: sessions in this process and worker
  /// processes read those of their own GPU in place (a worker through CUDA IPC, once the caller's
  /// queued work on that GPU is done); others are copied. outputs_on_device leaves the outputs on the
  /// GPU: a worker's stay in its memory, valid until the last copy of the tensor goes or the fleet
  /// shuts down. A device still starting is waited for (up to start_timeout_s after start()); an error
  /// before start().
  std::vector<Tensor> run(const Device& device, const std::vector<Tensor>& inputs, bool outputs_on_device = false);
  /// The same, returning at once with the outputs to come: several runs may be in flight per device, so
  /// one thread can keep every device busy. A worker process receives the inputs (copied) before this
  /// returns; an in-process session runs on a thread of its own and reads the inputs while it runs, so
  /// borrowed input memory must outlive the future. Errors of the run come out of the future's get();
  /// a device that is not ready throws here, as run() does. A worker that dies with runs in flight fails
  /// its device as soon as they find out (status() shows it), whether or not get() is called.
  std::future<std::vector<Tensor>> run_async(const Device& device, const std::vector<Tensor>& inputs, bool outputs_on_device = false);
  /// How tensors crossed to and from the worker processes so far (zero for sessions in this process).
  TransferCounters transfer_counters() const;
  /// The model's inputs and outputs: as its file declares them until a session has read them (the
  /// same, for ONNX Runtime reads them from the file), so they are known before start().
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;

  /// Phases of the start-up, all devices, on one clock (origin: start()).
  Timeline timeline() const;
  /// What this start left running for later starts once every device was done, in words: the warm
  /// pool it left on the node (automatic strategy, FleetOptions::auto_pool, RunConfig::warm_pool), or
  /// the model cache entry being made in the background. Complete once wait() has returned: once
  /// every device is done it waits for that decision (a pool's launch, a fraction of a second). Empty
  /// while a device is still starting, and when nothing.
  std::vector<std::string> left_behind() const;
  /// The same, typed: what a front end reads (the Python module says a warm pool as a warning).
  std::vector<LeftBehind> what_is_left() const;
  /// Waits at most `timeout_s` for the cache entry this fleet makes itself (not one a warm pool makes):
  /// what came of it, or nothing when there is none or it is still working.
  std::optional<std::string> wait_for_cache_fill(double timeout_s);
  /// Whether this fleet is making a cache entry itself now (after ready, in a background worker).
  bool making_cache_entry() const;
  /// Stops every session and worker. Idempotent. A start still under way ends: the fleet's own worker
  /// processes are stopped (their devices fail) and nothing is left for later starts; sessions being
  /// made in this process or on a pool cannot be stopped midway and are waited for.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ortfleet
