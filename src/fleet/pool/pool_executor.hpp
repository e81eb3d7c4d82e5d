#pragma once
// The one place where the pool's decisions (pool_core.hpp) are carried out on processes and the driver:
// WorkerPool's inside. The core decides under `mutex`; what takes time (a worker's initialisation, a
// status request, moving sessions, the driver's checkpoint) runs with `mutex` released, and its outcome
// goes back to the core as an event. worker_pool.cpp is the pool's face, pool_executor.cpp carries
// actions out, pool_status.cpp answers `pool status`.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fleet/local/local_start.hpp"
#include "fleet/pool/pool_core.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/fleet/worker_pool.hpp"

namespace ortfleet {
namespace pool = detail::pool;

/// How long a worker may take to answer the small requests the pool sends on its control channel
/// (evict, its sessions, trim) before it is taken as broken.
inline constexpr double kWorkerRequestTimeoutS = 60;

struct WorkerPool::Impl {
  /// What the pool keeps of one worker process besides the core's decisions.
  struct Member {
    pool::WorkerId id = 0;
    Device device;
    int pid = 0;
    std::string visible_devices;
    double ready_ms = 0;
    std::shared_ptr<detail::WorkerProcess> process;   // once initialised (or adopted)
    std::shared_ptr<detail::WorkerProcess> starting;  // while it initialises: end_workers() ends it too
    std::optional<Error> error;                        // why it never came up
    /// Where its sessions' relative paths are read from: a handed-over worker's job's folder.
    std::string folder;
    // Status answers, on a channel of their own: a status request never queues behind the control
    // channel's requests and never kills a worker that is slow to answer.
    std::mutex status_mutex;
    std::unique_ptr<detail::WorkerChannel> status_channel;  // status_mutex
    nlohmann::json last_status;                             // Impl::mutex
    int64_t last_status_ns = 0;                             // Impl::mutex
    bool status_in_flight = false;                          // Impl::mutex
    // Parking: the driver's checkpoint and restore of this worker never run at once (park_mutex), and
    // what status shows of it (Impl::mutex).
    std::mutex park_mutex;
    std::string park_note;           // why it did not park, when it did not
    nlohmann::json parked_status;    // its sessions as they were when it parked
    int64_t parked_since_ns = 0;
    /// What the worker held while it held nothing (its memory at ready): what its sessions add is
    /// what it holds beyond it. Unknown for a worker handed over with its sessions.
    std::optional<uint64_t> blank_host_anonymous;  // memory no file backs (Pss_Anon): no other worker shares it
    std::optional<uint64_t> blank_gpu_bytes;
    /// The plans of the sessions it dropped before it parked, by model: made again from the cache entry
    /// (restore_ahead). Impl::mutex.
    std::map<pool::ModelKey, std::vector<nlohmann::json>> unloaded_plans;
    /// Sessions (by key) made again from their cache entry at idle, or tried: never tried twice. Impl::mutex.
    std::set<std::string> remade_sessions;
  };
  using MemberPtr = std::shared_ptr<Member>;

  PoolOptions options;
  int64_t start_ns = 0;
  mutable std::mutex mutex;
  std::condition_variable changed;
  pool::PoolCore core;
  std::map<pool::WorkerId, MemberPtr> members;  // mutex; every worker the core has not forgotten
  std::map<int, std::string> ended_by_client;   // mutex; pid -> how a job said it ended it (note_ended_by_client)

  explicit Impl(PoolOptions chosen);

  // --- carrying out (mutex held through `lock`) ---
  /// Carries `actions` out: workers spawned (initialised on threads of their own), stopped in the
  /// background, a rewritten model's old sessions dropped (with the lock released meanwhile).
  void carry_out(std::unique_lock<std::mutex>& lock, const std::vector<pool::Action>& actions);
  /// A worker whose process is gone (or whose channel closed while it lives on): told to the core,
  /// and its process ended in the background.
  void report_death(std::unique_lock<std::mutex>& lock, pool::WorkerId id);
  MemberPtr member(pool::WorkerId id) const;  // mutex held; null when forgotten
  pool::DeviceIndex index_of(const Device& device) const;  // throws for a device not in the pool
  pool::WorkerId id_of(const detail::WorkerProcess* process) const;  // mutex held; 0 when none of ours
  /// Waits (holding `lock`) until `id` is up or failed; throws when `timeout_s` passes first.
  void await_up(std::unique_lock<std::mutex>& lock, pool::WorkerId id, double timeout_s, const char* which);

  // --- what takes time (mutex not held) ---
  /// Restores `id` from the driver's checkpoint when the core says it needs it. A worker the driver
  /// cannot restore is ended (the core replaces it) and the error thrown.
  void restore_if_needed(const MemberPtr& m);
  /// `m`'s status answer on its own channel, within `timeout_s`; throws when it does not answer.
  nlohmann::json ask_status(Member& m, bool with_plans, double timeout_s);
  /// Whether any job holds a session on `m` (or it does not answer: taken as yes).
  bool holds_jobs_sessions(Member& m);
  /// Whether `m` holds no session (or is gone); asking it.
  bool holds_nothing(Member& m);
  /// Starts `from`'s sessions that nobody holds on `to` (each from its plan, then let go, so that it
  /// stays resident) and drops them from `from`. The models moved; `from_empty`: it holds none now.
  std::vector<pool::ModelKey> move_sessions(Member& from, Member& to, bool& from_empty);
  /// Drops the sessions of `path` nobody holds from worker `id` (its file was rewritten).
  void drop_model(pool::WorkerId id, const std::string& path);
  /// Folds worker `from` in (pool_core.hpp, fold_begin); whether it left its role.
  bool fold_in(pool::WorkerId from);
  /// Starts `plan` on `to` on a channel of the pool's own and lets go of the session: resident there.
  /// Throws ortfleet::Error when it does not start.
  void make_resident(Member& to, detail::LocalStartPlan plan);

  // --- a warm node (pool_warm_node.cpp) ---
  /// Right before `m` parks (its park lock held, the core's park_begin done): drops the sessions in
  /// `said` (its status with plans) nobody holds whose cache entry holds more than unload_above_bytes,
  /// and tells the core; returns `said` without them.
  nlohmann::json unload_before_parking(Member& m, nlohmann::json said);
  /// Makes the sessions of `model` that `m` dropped before parking again (from their cache entry).
  bool remake_unloaded(Member& m, const pool::ModelKey& model);
  /// Parks every worker the core lets park (WorkerPool::park_workers): each trimmed first, then, under
  /// its park lock and only while the core still finds it unclaimed and `still_idle` says so, the
  /// driver's checkpoint.
  ParkOutcome park_idle_workers(double lock_timeout_s, const std::function<bool()>& still_idle);

  // --- threads of its own, joined once done ---
  struct Background {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Background> background;  // mutex
  /// Runs `work` on a thread of its own; threads that have finished are joined first. mutex held.
  void in_background(std::function<void()> work);

  /// The model as the core tells one file from another: the path a start named and what the file
  /// holds now.
  static pool::ModelKey model_key(const std::string& model);

 private:
  void launch(pool::WorkerId id, pool::DeviceIndex device);
  void stop_in_background(pool::WorkerId id, bool by_signal, const std::string& why);
};

}  // namespace ortfleet
