#pragma once
// The warm pool's decisions, and nothing else: which worker a start goes to, when a spare is started or
// stopped, what folds into the shared worker, what may park. A pure state machine: events go in (a
// worker up or failed, a claim, a start done or failed, a hand-over, a death, an idle tick, park and
// restore done, ...), actions come out (spawn, stop, fold, drop a model's old sessions, ...), and its
// invariants are checked after every event. No process, thread, clock or I/O lives here: the pool's
// executor (pool_executor.hpp) carries the actions out on processes and the driver, and
// tests/fleet/pool/test_pool_core.cpp drives it with tables and random event sequences.
//
// The state diagram is in this folder's README.md. In short, per device:
//   roles:  shared (holds the proven models), spare (blank, for the next new model while the shared
//           one holds sessions), extra (a job's worker handed over, or a new model's own while the
//           spare is busy: folded into the shared worker when the pool is idle)
//   phases: starting -> ready <-> claimed/trial (starts handed out) ; ready <-> parked ;
//           any role -> retiring (stopped in the background) -> dead ; starting -> failed
//   a warm node (issue 60): a restore ahead of a job holds a device's parked workers like a claim and
//           keeps the device from parking until the next park round; a parked device keeps no spare;
//           models unloaded before parking are never resident until made again
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ortfleet::detail::pool {

using WorkerId = uint64_t;   ///< never used twice in one pool
using DeviceIndex = size_t;  ///< the device's place in the pool's device list

enum class Role { shared, spare, extra };
/// What a worker is doing. `claimed` and `trial` hold starts handed out (a model's first start is a
/// trial: no other start joins that worker until it is over); `parked`: its device state lives in its
/// host memory (the driver's checkpoint); `retiring`: out of its role, being stopped; `failed`: it
/// never came up; `dead`: gone, forgotten.
enum class Phase { starting, ready, claimed, trial, parked, retiring, failed, dead };
const char* to_string(Role role);
const char* to_string(Phase phase);

/// A model file as the pool tells one from another: its path (as the start named it) and what it holds
/// now (a file rewritten in place is another model under the same path).
struct ModelKey {
  std::string path;
  std::string content;
  auto operator<=>(const ModelKey&) const = default;
};

/// One worker as the core knows it.
struct Worker {
  WorkerId id = 0;
  DeviceIndex device = 0;
  Role role = Role::shared;  ///< its role while it had one (a retiring worker keeps its last)
  Phase phase = Phase::starting;
  int claims = 0;          ///< starts handed out and not reported back, and a fold in progress
  bool restore_pending = false;  ///< claimed while parked: the executor restores it before use
  bool park_refused = false;     ///< the driver refused to park it: not tried again until it is used
  bool folding = false;          ///< its sessions are moving into the shared worker (one of `claims`)
  bool stop_when_up = false;     ///< retired while starting: stopped as soon as it is up
  int restarts = 0;              ///< shared workers before it that died on its device
  std::set<ModelKey> models;     ///< whose sessions it holds, as far as the pool knows
  /// Models whose sessions it dropped before it parked (weights the cache entry uploads faster than the
  /// driver restores them): never in `models`, so no start is ever handed a session whose weights are
  /// gone; made again from the entry by a restore ahead of their job, or by their next start, here.
  std::set<ModelKey> unloaded;
  bool up() const { return phase == Phase::ready || phase == Phase::claimed || phase == Phase::trial || phase == Phase::parked; }
  /// Nothing of any job runs or stays here.
  bool blank() const { return claims == 0 && models.empty(); }
};

// --- actions: what the executor carries out -----------------------------------------------------------

/// Start a worker process for `device` and initialise it; report WorkerUp or WorkerFailed.
struct Spawn {
  WorkerId worker;
  DeviceIndex device;
};
/// Stop a worker that nobody needs any more (by signal when it is parked: it would block in its first
/// CUDA call); report Stopped.
struct Stop {
  WorkerId worker;
  bool by_signal;
  std::string why;
};
/// Drop the sessions nobody holds of a model file that was rewritten (its old content) from `worker`.
struct DropModel {
  WorkerId worker;
  std::string path;
};
struct Action {
  enum class Kind { spawn, stop, drop_model } kind;
  Spawn spawn{};
  Stop stop{};
  DropModel drop{};
};

// --- claims: where a start goes ---------------------------------------------------------------------

/// A start of `model` on `device`. `isolated` (PoolOptions::isolate_new_models) is the pool's.
struct ClaimRequest {
  DeviceIndex device = 0;
  ModelKey model;
};
/// What the executor learnt while a claim waited; each claim gathers its own and asks again with them.
struct ClaimFacts {
  /// Workers asked whether a job holds a session on them, with the answer; an answer counts only
  /// while the worker took no claim since (`claims_seen`).
  struct Holders {
    bool holds = true;
    uint64_t claims_seen = 0;
  };
  std::map<WorkerId, Holders> holders;
  std::optional<WorkerId> own_extra;  ///< the worker this claim had started for itself
};
struct ClaimDecision {
  enum class Kind {
    granted,     ///< `worker` is claimed for this start (restore it first where `restore`)
    wait_for,    ///< `worker` is starting: wait until it is up or failed, then ask again
    ask_holders, ///< ask `worker` whether a job holds a session there, record it in the facts, ask again
    refused,     ///< `refusal` says why
  } kind = Kind::refused;
  WorkerId worker = 0;
  bool trial = false;
  bool restore = false;
  /// What the worker waited for is ("worker", "spare worker", "extra worker"): for the timeout's error.
  const char* waiting_for = "worker";
  enum class Refusal { none, device_failed, stopping } refusal = Refusal::none;
  /// The start goes to the shared worker after all, unisolated: the extra worker started for it failed.
  bool unisolated = false;
  std::vector<Action> actions;  ///< to carry out first (a spare or extra spawned, old sessions dropped)
};

// --- restoring ahead of a job ----------------------------------------------------------------------

/// What restore_ahead decided for a device a job's client said it will use.
struct RestoreAhead {
  /// Workers held for it (claimed, so that they neither park nor retire meanwhile): the executor
  /// restores each where restore_needed(), makes `remake` on `remake_on` if it is one of them, and lets
  /// go with release().
  std::vector<WorkerId> held;
  std::optional<WorkerId> remake_on;  ///< the job's model was unloaded before that worker parked
};

// --- idle time: folding in and parking --------------------------------------------------------------

/// One step of folding a device in: what happened to `from`.
struct FoldStep {
  enum class Kind {
    none,      ///< not now (busy, or not up)
    promoted,  ///< it became the shared worker (the old one held nothing): done, nothing moved
    move,      ///< move its sessions nobody holds into `into`; report FoldDone (both are claimed meanwhile)
  } kind = Kind::none;
  WorkerId from = 0;
  WorkerId into = 0;
  bool restore_from = false;  ///< parked: restore before moving
  bool restore_into = false;
  std::vector<Action> actions;
};

struct CoreOptions {
  size_t devices = 1;
  bool isolate_new_models = true;
};

/// What an invariant violation says; tests make it throw, the pool logs it.
using ViolationHandler = std::function<void(const std::string&)>;

class PoolCore {
 public:
  /// Each device starts with one worker, its shared one: the Spawn actions are initial_actions().
  explicit PoolCore(CoreOptions options, ViolationHandler on_violation = {});
  std::vector<Action> initial_actions() const { return initial_; }

  // --- workers coming and going ---
  /// A spawned worker is initialised. Actions: its Stop when nobody wants it any more.
  std::vector<Action> worker_up(WorkerId worker);
  /// A spawned worker could not be initialised (or was stopped while it started).
  std::vector<Action> worker_failed(WorkerId worker);
  /// A worker's process ended by itself (killed, crashed, closed its channel). Actions: the device's
  /// new shared worker spawned when it was the shared one and no blank spare can take its place.
  std::vector<Action> worker_died(WorkerId worker);
  /// A Stop is done: the worker is forgotten.
  void stopped(WorkerId worker);
  /// A job's own worker, handed over with `model` loaded: it becomes the shared worker when that holds
  /// nothing (the old one goes), else an extra worker until it is folded in. Returns its id.
  WorkerId adopted(DeviceIndex device, const ModelKey& model, std::vector<Action>& actions);
  /// Keeps each device's workers as they should be: a spare while the shared worker holds models, none
  /// while it holds nothing. Returns how many shared workers were replaced since the last call.
  int maintain(std::vector<Action>& actions);
  /// Stops spawning: every worker is ended by the executor.
  void stopping();
  bool is_stopping() const { return stopping_; }

  // --- starts ---
  /// Where a start goes; see ClaimDecision. A start that was granted reports start_done or start_failed.
  ClaimDecision claim(const ClaimRequest& request, ClaimFacts& facts);
  /// The granted start made its session and ran: the model is proven (later starts go where its
  /// sessions are); a worker that proved a new model while the shared one holds nothing becomes shared.
  std::vector<Action> start_done(WorkerId worker, const ModelKey& model);
  /// The granted start failed. Returns true when the executor must find out whether the worker holds
  /// any session now (then report found_empty); false: nothing more to do.
  bool start_failed(WorkerId worker);
  /// After start_failed: whether the worker holds no session (or is gone). A spare or extra that holds
  /// nothing and has no other start is stopped, unless it stays the blank spare.
  std::vector<Action> found_empty(WorkerId worker, bool empty, bool alive);
  /// The worker dropped every session nobody holds and holds none now (an evict).
  void emptied(WorkerId worker);
  /// Holds an up worker for the pool's own work on it (an evict, dropping a model's old sessions): it
  /// neither parks nor retires meanwhile. False when it is not up. The executor restores it first where
  /// restore_needed(), and lets go with release().
  bool hold(WorkerId worker);
  void release(WorkerId worker);

  // --- idle time ---
  /// The workers of `device` to fold in: its spare while it holds models, and its extra workers.
  std::vector<WorkerId> fold_candidates(DeviceIndex device) const;
  /// Starts folding `from` in (FoldStep).
  FoldStep fold_begin(WorkerId from);
  /// A move is over: `moved` went into `into`; `from_empty`: it holds no session any more. `from` then
  /// becomes the spare, or is stopped.
  std::vector<Action> fold_done(WorkerId from, WorkerId into, const std::vector<ModelKey>& moved, bool from_empty);
  /// The workers that may park now (up, unclaimed, not parked, not refused before), but a blank spare
  /// whose shared worker may park: it is stopped once that one has parked (parked()).
  std::vector<WorkerId> park_candidates() const;
  /// A round of parking begins (the pool has been idle for its park time since it was last used, a
  /// restore ahead included): the devices restored ahead may park again. Returns park_candidates().
  std::vector<WorkerId> park_round();
  /// Right before the driver's checkpoint of `worker`: whether it may still park (nobody claimed it
  /// since it was chosen, and no job's client said it will use its device since the round began); it
  /// is `parked` from now on if so.
  bool park_begin(WorkerId worker);
  /// Between park_begin and the checkpoint: the sessions of `dropped` (nobody held them) are gone from
  /// the worker, their models `unloaded` (made again from the cache entry later).
  void unloaded_for_parking(WorkerId worker, const std::vector<ModelKey>& dropped);
  /// The checkpoint is done. A shared worker parked: its device's blank spare is stopped and none is
  /// started while the device stays parked (maintain); a restore, a claim or a restore ahead brings it back.
  std::vector<Action> parked(WorkerId worker);
  /// The driver did not park it: it is not tried again until it is used.
  void park_failed(WorkerId worker);
  /// Whether a claimed worker still needs its restore (the park it was claimed during may have failed).
  bool restore_needed(WorkerId worker) const;
  void restored(WorkerId worker);

  // --- restoring ahead ---
  /// A job's client says it will use `device` (and, where it says so, `model`): every parked worker of
  /// the device is held to be restored now, while the job still starts, a worker where `model` was
  /// unloaded before parking is held to make it again, the device's spare may be made again, and no
  /// worker of the device parks until the next park_round(). Like a claim, it wins over a park in
  /// progress: a worker whose checkpoint runs is restored once it is done.
  RestoreAhead restore_ahead(DeviceIndex device, const std::optional<ModelKey>& model);
  /// `model` was made again on `worker` (or not: `made` false; its next start makes it).
  void remade(WorkerId worker, const ModelKey& model, bool made);
  /// Whether the device has been restored ahead since the last park round.
  bool restored_ahead(DeviceIndex device) const { return slots_.at(device).ahead; }
  /// Whether the device parked and keeps no spare until it is used again.
  bool spare_paused(DeviceIndex device) const { return slots_.at(device).spare_paused; }

  // --- what it knows ---
  const Worker* find(WorkerId worker) const;
  /// The workers of `device` in their roles, shared first; none of the retiring ones.
  std::vector<const Worker*> workers_of(DeviceIndex device) const;
  std::vector<const Worker*> retiring() const;
  /// The device's shared worker.
  const Worker& shared(DeviceIndex device) const;
  bool proven(const ModelKey& model) const { return proven_.count(model) != 0; }
  size_t devices() const { return slots_.size(); }
  /// Every invariant, checked: a description of the first one broken, or nothing.
  std::optional<std::string> violation() const;

 private:
  struct Slots {
    WorkerId shared = 0;
    std::optional<WorkerId> spare;
    std::vector<WorkerId> extra;
    bool ahead = false;         ///< restored ahead of a job since the last park round: nothing of it parks
    bool spare_paused = false;  ///< its shared worker parked: no spare until the device is used again
  };
  Worker& at(WorkerId id);
  Worker* lookup(WorkerId id);
  WorkerId spawn(DeviceIndex device, std::vector<Action>& actions);
  void retire(Worker& w, const char* why, std::vector<Action>& actions);
  void unslot(Worker& w);
  void promote(Worker& w, std::vector<Action>& actions);
  void make_spare_or_retire(Worker& w, std::vector<Action>& actions);
  void take_claim(Worker& w, bool trial);
  /// The device is used again (a claim, a restore, a restore ahead): its spare may be made again.
  void resume_spare(DeviceIndex device) { slots_.at(device).spare_paused = false; }
  void release_claim(Worker& w);
  ClaimDecision grant(Worker& w, bool trial, std::vector<Action>& actions);
  std::vector<Action> forget_old_contents(const ModelKey& model);
  ClaimDecision home_for(Slots& slots, const ClaimRequest& request, std::vector<Action>& actions);
  ClaimDecision trial_worker(Slots& slots, const ClaimRequest& request, ClaimFacts& facts, std::vector<Action>& actions);
  void check();

  CoreOptions options_;
  ViolationHandler on_violation_;
  std::vector<Action> initial_;
  std::vector<Slots> slots_;
  std::map<WorkerId, Worker> workers_;  // every worker not yet forgotten
  std::set<ModelKey> proven_;           // models that ran in this pool
  std::map<WorkerId, uint64_t> claims_taken_;  // per worker, every claim it ever took (ClaimFacts' freshness)
  WorkerId next_id_ = 1;
  int replaced_ = 0;
  bool stopping_ = false;
};

}  // namespace ortfleet::detail::pool
