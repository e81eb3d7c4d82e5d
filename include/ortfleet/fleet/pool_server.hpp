#pragma once
// `ortfleet serve`: a node-local daemon that keeps a warm worker pool (worker_pool.hpp) across jobs.
// Clients attach through a Unix socket that only its user may use (the socket is mode 0600 in a 0700
// folder, and the server refuses a client of another user by its credentials). A client's open
// request names a model, devices and settings; per device the server starts the session on its warm
// worker, or finds it resident, and hands the client a channel of its own to that worker: runs go
// straight to the worker, never through the server.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/fleet/worker_pool.hpp"

namespace ortfleet {

/// $XDG_RUNTIME_DIR/ortfleet/pool.sock, or /tmp/ortfleet-<uid>/pool.sock where XDG_RUNTIME_DIR is
/// unset or names no folder (a Slurm job inherits the login node's). Under a Slurm allocation the
/// socket is the job's own, pool-job<SLURM_JOB_ID>.sock: the steps of one job share a pool, and
/// another job's starts never find it.
std::string default_pool_socket();
/// The default socket of a process whose XDG_RUNTIME_DIR is `runtime_dir` ("": none).
std::string default_pool_socket_in(const std::string& runtime_dir);

namespace detail {
struct LocalStartPlan;
}

/// What a node daemon makes resident as it starts, before any job asks (issue 60): each model's session
/// made on its device, then parked with the pool once it is idle for park_after_s.
struct PreloadOptions {
  /// Models named to the daemon (`serve --preload`, the config's `warm_pool.preload`): on every device,
  /// with the settings a job's Fleet starts them with by default (the daemon's config).
  std::vector<std::string> models;
  /// Also the models this node's model cache has entries of (what `ortfleet cache import` brought),
  /// where their files are on this node.
  bool cached = false;
  /// Remember the models this daemon serves (its state folder) and make them resident again, with the
  /// settings they were served with, when it next starts. `ortfleet serve` does by default
  /// (`--no-remember`); a pool made in a program (bench's, a test's) only where it asks.
  bool remember = false;
  /// Host memory (bytes) the models made resident at start may take in all (their weights live in
  /// host memory while parked): named ones first, then those served before, most recently used first,
  /// then the cache's; what does not fit is left out. Unset: a quarter of this machine's memory.
  std::optional<uint64_t> budget_bytes;
  /// Where it remembers; empty: <cache root>/serve/<this host and the socket>.
  std::string state_dir;
};

struct ServeOptions {
  PoolOptions pool;
  /// A pool a job left (left_by_job) makes nothing resident at start and remembers nothing.
  PreloadOptions preload;
  std::string socket_path;  ///< empty: default_pool_socket()
  /// Seconds with no client attached and nothing in the making after which serve() returns; 0: never.
  double idle_exit_s = 0;
  /// Seconds with no client attached after which the workers park: the driver checkpoints their GPU
  /// state into their host memory (NVIDIA driver r570+), so the idle pool holds no GPU memory; a job's
  /// request restores them first. 0: never park.
  double park_after_s = 0;
  /// Seconds with no client attached after which what jobs left on spare and extra workers folds into
  /// each device's shared worker (and those workers end), so that an idle device keeps at most two
  /// worker processes; parking folds first too. 0: only before parking.
  double fold_after_s = 30;
  /// A pool a job's start left behind (not `ortfleet serve`): a node daemon that starts on its socket
  /// takes it over once no job uses it, rather than failing (serve_pool, serve_pool_detached).
  bool left_by_job = false;
  /// A Slurm job the server ends with: serve() returns within a second once no step of that job runs
  /// on this node any more, so that a pool started in a job never outlives its allocation (Slurm's
  /// process tracking may not end a daemon in a session of its own). Unset: the job this process runs
  /// in (SLURM_JOB_ID), if any; "": none.
  std::optional<std::string> end_with_slurm_job;
};

class PoolServer {
 public:
  /// Starts the pool and listens on the socket. Throws ortfleet::Error when another server listens
  /// there already, or the folder is not private.
  explicit PoolServer(ServeOptions options);
  ~PoolServer();  ///< stops serving, removes the socket, stops the workers
  PoolServer(const PoolServer&) = delete;
  PoolServer& operator=(const PoolServer&) = delete;

  const std::string& socket_path() const;
  WorkerPool& pool();
  /// Serves clients until stop(); restarts workers that die meanwhile.
  void serve();
  /// Makes serve() return (from any thread). Clients attached to workers keep their channels until
  /// the pool stops.
  void stop();
  /// Makes the plan's model cache entry in the background (a low-priority worker), for later starts
  /// that do not find the model resident: what a job whose start missed the cache asks of the pool it
  /// leaves. The job's own workers, sessions loaded, come to the pool as the job ends (hand-over).
  void make_entry_in_background(const detail::LocalStartPlan& plan);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Serves `options` in this process until a stop signal (SIGTERM, SIGINT), `ortfleet pool stop`, or
/// (options.idle_exit_s) until nobody used it for that long; says on stderr what it does, unless
/// `quiet`: the workers, the GPU memory the pool holds while idle, parking, why it ends. `ortfleet serve`.
int serve_pool(const ServeOptions& options, bool quiet);

/// Whether a pool's idle workers park (ServeOptions::park_after_s), and why not.
struct ParkingStatus {
  enum class State {
    on,           ///< they park after park_after_s
    off,          ///< park_after_s is 0; `why` names the setting
    unavailable,  ///< they cannot park here; `why` says why (a CPU worker, a driver without the API, ...)
  };
  State state = State::off;
  std::string why;
};

/// What serve_pool_detached's daemon said once it listened.
struct DetachedPool {
  std::string socket_path;
  std::string log_path;    ///< where it writes what it does
  double park_after_s = 0;
  ParkingStatus parking;
  /// A pool a job left was serving on the socket: the daemon waited for it to end (or stopped it, when
  /// it was asked to take over) before it listened.
  std::string replaced;
};
/// Starts `options`'s pool as a daemon in a session of its own (`ortfleet serve --detach`: a node
/// daemon that a systemd unit, a Slurm job script or a shell starts and forgets) and returns once it
/// listens. Throws ortfleet::Error when it could not start (another server on the socket, a folder
/// that is not private, ...), with its reason.
DetachedPool serve_pool_detached(const ServeOptions& options);

/// The pool server's status: {"ortfleet_pool": 1, "socket", "pid", "clients", "slurm_job", "devices": [{device,
/// state, pid, sessions, memory_bytes, ...}]}. Throws ortfleet::Error when no server answers.
std::string pool_status(const std::string& socket_path, double timeout_s = 30);
/// Has the server drop every session nobody holds; how many it dropped.
size_t pool_evict(const std::string& socket_path, double timeout_s = 60);
/// Asks the server to stop (its workers with it) and waits at most `timeout_s` until its socket is gone.
/// Throws ortfleet::Error when no server answers there, or it is still there at the deadline.
void pool_stop(const std::string& socket_path, double timeout_s = 60);

/// Whether a client of user `client_uid` may use the pool of user `server_uid`; throws
/// ortfleet::Error saying who may when not.
void check_pool_client(unsigned client_uid, unsigned server_uid, const std::string& socket_path);

}  // namespace ortfleet
