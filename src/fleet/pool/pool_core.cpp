// The warm pool's decisions (pool_core.hpp): a pure state machine, its invariants checked after every event.
#include "fleet/pool/pool_core.hpp"

#include <algorithm>
#include <stdexcept>

namespace ortfleet::detail::pool {

const char* to_string(Role role) {
  switch (role) {
    case Role::shared: return "shared";
    case Role::spare: return "spare";
    case Role::extra: return "extra";
  }
  return "?";
}

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::starting: return "starting";
    case Phase::ready: return "ready";
    case Phase::claimed: return "claimed";
    case Phase::trial: return "trial";
    case Phase::parked: return "parked";
    case Phase::retiring: return "retiring";
    case Phase::failed: return "failed";
    case Phase::dead: return "dead";
  }
  return "?";
}

PoolCore::PoolCore(CoreOptions options, ViolationHandler on_violation) : options_(options), on_violation_(std::move(on_violation)) {
  // One worker per device to start with: while it holds nothing, a model new to the pool may start in
  // it (there is nobody's session to protect); a spare comes once it holds sessions (maintain).
  for (DeviceIndex d = 0; d < options_.devices; ++d) {
    Slots slots;
    slots.shared = spawn(d, initial_);
    slots_.push_back(slots);
  }
  check();
}

// --- helpers -------------------------------------------------------------------------------------------

Worker* PoolCore::lookup(WorkerId id) {
  const auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

const Worker* PoolCore::find(WorkerId worker) const {
  const auto it = workers_.find(worker);
  return it == workers_.end() ? nullptr : &it->second;
}

Worker& PoolCore::at(WorkerId id) {
  Worker* w = lookup(id);
  if (w == nullptr) throw std::logic_error("the pool's core has no worker " + std::to_string(id));
  return *w;
}

WorkerId PoolCore::spawn(DeviceIndex device, std::vector<Action>& actions) {
  const WorkerId id = next_id_++;
  Worker w;
  w.id = id;
  w.device = device;
  workers_[id] = w;
  Action a{Action::Kind::spawn};
  a.spawn = {id, device};
  actions.push_back(a);
  return id;
}

void PoolCore::unslot(Worker& w) {
  Slots& s = slots_.at(w.device);
  if (s.spare == w.id) s.spare.reset();
  s.extra.erase(std::remove(s.extra.begin(), s.extra.end(), w.id), s.extra.end());
}

void PoolCore::retire(Worker& w, const char* why, std::vector<Action>& actions) {
  if (w.claims > 0 && on_violation_) on_violation_("worker " + std::to_string(w.id) + " was retired while claimed (" + why + ")");
  unslot(w);
  switch (w.phase) {
    case Phase::starting:
      // Its start ends, and the process with it: stopped as soon as it is up.
      w.phase = Phase::retiring;
      w.stop_when_up = true;
      return;
    case Phase::failed:
    case Phase::dead: workers_.erase(w.id); return;  // nothing runs
    case Phase::retiring: return;
    default: break;
  }
  Action a{Action::Kind::stop};
  a.stop = {w.id, w.phase == Phase::parked, why};
  w.phase = Phase::retiring;
  actions.push_back(a);
}

void PoolCore::promote(Worker& w, std::vector<Action>& actions) {
  Slots& s = slots_.at(w.device);
  const WorkerId old = s.shared;
  unslot(w);
  s.shared = w.id;
  w.role = Role::shared;
  if (old != w.id) {
    if (Worker* o = lookup(old)) make_spare_or_retire(*o, actions);
  }
}

void PoolCore::make_spare_or_retire(Worker& w, std::vector<Action>& actions) {
  Slots& s = slots_.at(w.device);
  if (s.spare == w.id) return;
  unslot(w);
  if (!s.spare && options_.isolate_new_models && !stopping_ && w.phase != Phase::failed) {
    s.spare = w.id;
    w.role = Role::spare;
    return;
  }
  retire(w, "the device has its two workers", actions);
}

void PoolCore::take_claim(Worker& w, bool trial) {
  if (w.phase == Phase::parked) w.restore_pending = true;
  ++w.claims;
  ++claims_taken_[w.id];
  w.park_refused = false;  // used again: worth another try when the pool is idle next
  w.phase = trial || w.phase == Phase::trial ? Phase::trial : Phase::claimed;
}

void PoolCore::release_claim(Worker& w) {
  if (w.claims <= 0) {
    if (on_violation_) on_violation_("worker " + std::to_string(w.id) + " reported a start it was never given");
    return;
  }
  --w.claims;
  if (w.phase != Phase::claimed && w.phase != Phase::trial) return;
  // Any report ends a trial: the model's first start is over, or another one is.
  if (w.claims > 0) {
    w.phase = Phase::claimed;
  } else if (w.restore_pending) {
    w.phase = Phase::parked;  // claimed while parked and let go before anyone restored it: still parked
    w.restore_pending = false;
  } else {
    w.phase = Phase::ready;
  }
}

ClaimDecision PoolCore::grant(Worker& w, bool trial, std::vector<Action>& actions) {
  ClaimDecision d;
  d.kind = ClaimDecision::Kind::granted;
  d.worker = w.id;
  d.trial = trial;
  take_claim(w, trial);
  d.restore = w.restore_pending;
  d.actions = std::move(actions);
  return d;
}

std::vector<Action> PoolCore::forget_old_contents(const ModelKey& model) {
  std::vector<Action> actions;
  for (auto it = proven_.begin(); it != proven_.end();) {
    it = it->path == model.path && it->content != model.content ? proven_.erase(it) : std::next(it);
  }
  for (auto& [id, w] : workers_) {
    bool dropped = false;
    for (auto it = w.models.begin(); it != w.models.end();) {
      if (it->path == model.path && it->content != model.content) {
        it = w.models.erase(it);
        dropped = true;
      } else {
        ++it;
      }
    }
    if (dropped && w.up()) {
      Action a{Action::Kind::drop_model};
      a.drop = {id, model.path};
      actions.push_back(a);
    }
  }
  return actions;
}

// --- workers coming and going ------------------------------------------------------------------------

std::vector<Action> PoolCore::worker_up(WorkerId worker) {
  std::vector<Action> actions;
  Worker* w = lookup(worker);
  if (w == nullptr) return actions;
  if (w->phase != Phase::starting && w->phase != Phase::retiring) return actions;
  if (w->stop_when_up || stopping_) {
    // Nobody wants it any more: it ends before anything was given to it.
    Action a{Action::Kind::stop};
    a.stop = {w->id, false, stopping_ ? "the pool is stopping" : "it was retired while it started"};
    actions.push_back(a);
    w->phase = Phase::retiring;
    w->stop_when_up = false;
  } else {
    w->phase = Phase::ready;
  }
  check();
  return actions;
}

std::vector<Action> PoolCore::worker_failed(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr) return {};
  if (w->phase == Phase::retiring) {
    workers_.erase(worker);  // retired while it started: nothing to stop
  } else if (w->phase == Phase::starting) {
    w->phase = Phase::failed;  // in its slot, failed: the device says why
  }
  check();
  return {};
}

std::vector<Action> PoolCore::worker_died(WorkerId worker) {
  std::vector<Action> actions;
  Worker* w = lookup(worker);
  if (w == nullptr) return actions;
  if (w->phase == Phase::retiring) {
    workers_.erase(worker);
    return actions;
  }
  if (!w->up()) return actions;  // a worker still starting reports its failure itself
  if (stopping_) {
    w->phase = Phase::dead;
    return actions;
  }
  Slots& s = slots_.at(w->device);
  const int restarts = w->restarts;
  if (s.shared == worker) {
    // Its sessions are gone with it (its clients have had their error). A spare that holds nothing
    // takes its place at once; else a new worker starts.
    Worker* spare = s.spare ? lookup(*s.spare) : nullptr;
    if (spare != nullptr && spare->up() && spare->blank()) {
      s.shared = spare->id;
      spare->role = Role::shared;
      s.spare.reset();
    } else {
      s.shared = spawn(w->device, actions);
    }
    at(s.shared).restarts = restarts + 1;
    ++replaced_;
  } else {
    unslot(*w);
  }
  workers_.erase(worker);
  check();
  return actions;
}

void PoolCore::stopped(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr) return;
  if (w->phase == Phase::retiring && !w->stop_when_up) {
    const Slots& s = slots_.at(w->device);
    const bool slotted = s.shared == worker || s.spare == worker || std::count(s.extra.begin(), s.extra.end(), worker) > 0;
    if (slotted) w->phase = Phase::dead;  // stopping: its slot stays until the pool ends
    else workers_.erase(worker);
  }
  check();
}

WorkerId PoolCore::adopted(DeviceIndex device, const ModelKey& model, std::vector<Action>& actions) {
  actions = forget_old_contents(model);
  proven_.insert(model);  // it ran in the job that handed it over
  Slots& s = slots_.at(device);
  const WorkerId id = next_id_++;
  Worker w;
  w.id = id;
  w.device = device;
  w.role = Role::extra;
  w.phase = Phase::ready;
  w.models.insert(model);
  workers_[id] = w;
  Worker& adopted = at(id);
  // Where the shared worker holds nothing, the job's worker takes its place, model loaded (the old one,
  // ready or still starting, becomes the spare or goes); else it waits as an extra worker until its
  // sessions move into the shared one (folded in when the pool is idle).
  const Worker& shared = at(s.shared);
  if (shared.blank() && shared.phase != Phase::failed && shared.phase != Phase::dead && !stopping_) promote(adopted, actions);
  else s.extra.push_back(id);
  check();
  return id;
}

int PoolCore::maintain(std::vector<Action>& actions) {
  if (stopping_) return 0;
  const int replaced = replaced_;
  replaced_ = 0;
  for (DeviceIndex d = 0; d < slots_.size(); ++d) {
    Slots& s = slots_[d];
    Worker& shared = at(s.shared);
    Worker* spare = s.spare ? lookup(*s.spare) : nullptr;
    // A spare while the shared worker holds sessions (a new model's first start must not go beside
    // them); none while it holds nothing (it can take a new model itself).
    if (options_.isolate_new_models && spare == nullptr && !shared.models.empty() && shared.up()) {
      s.spare = spawn(d, actions);
      at(*s.spare).role = Role::spare;
    } else if (spare != nullptr && spare->up() && spare->blank() && shared.up() && shared.blank()) {
      retire(*spare, "the shared worker holds nothing: one blank worker is enough", actions);
    }
  }
  check();
  return replaced;
}

void PoolCore::stopping() {
  stopping_ = true;
  for (auto& [id, w] : workers_) {
    if (w.phase == Phase::starting) w.stop_when_up = true;
  }
}

// --- starts --------------------------------------------------------------------------------------------

ClaimDecision PoolCore::claim(const ClaimRequest& request, ClaimFacts& facts) {
  ClaimDecision refused;
  if (stopping_) {
    refused.refusal = ClaimDecision::Refusal::stopping;
    return refused;
  }
  std::vector<Action> actions = forget_old_contents(request.model);
  Slots& s = slots_.at(request.device);
  const bool proven = proven_.count(request.model) != 0;
  // A model resident in a worker that is up is handed out there at once: never behind a shared worker
  // still starting (the pool a job leaves starts its own while the job's workers come over).
  const auto resident_home = [&]() -> Worker* {
    std::vector<WorkerId> ids{s.shared};
    if (s.spare) ids.push_back(*s.spare);
    ids.insert(ids.end(), s.extra.begin(), s.extra.end());
    for (WorkerId id : ids) {
      Worker& w = at(id);
      if (w.up() && w.phase != Phase::trial && w.models.count(request.model) != 0) return &w;
    }
    return nullptr;
  };
  ClaimDecision d;
  if (proven && !facts.own_extra) {
    if (Worker* home = resident_home()) d = grant(*home, false, actions);
  }
  if (d.kind != ClaimDecision::Kind::granted) {
    Worker& shared = at(s.shared);
    if (shared.phase == Phase::starting) {
      d.kind = ClaimDecision::Kind::wait_for;
      d.worker = shared.id;
      d.actions = std::move(actions);
    } else if (shared.phase == Phase::failed || shared.phase == Phase::dead) {
      d.kind = ClaimDecision::Kind::refused;
      d.refusal = ClaimDecision::Refusal::device_failed;
      d.worker = shared.id;
      d.actions = std::move(actions);
    } else if ((proven || !options_.isolate_new_models) && !facts.own_extra) {
      if (Worker* home = resident_home()) d = grant(*home, false, actions);
      else d = home_for(s, request, actions);
    } else {
      d = trial_worker(s, request, facts, actions);
    }
  }
  check();
  return d;
}

ClaimDecision PoolCore::home_for(Slots& s, const ClaimRequest& request, std::vector<Action>& actions) {
  // A proven model's start goes to the shared worker; but never beside a model's first start (the
  // spare takes it then).
  Worker& shared = at(s.shared);
  if (shared.phase != Phase::trial || !options_.isolate_new_models) return grant(shared, false, actions);
  if (!s.spare) {
    s.spare = spawn(request.device, actions);
    at(*s.spare).role = Role::spare;
  }
  Worker& spare = at(*s.spare);
  if (spare.phase == Phase::starting) {
    ClaimDecision d;
    d.kind = ClaimDecision::Kind::wait_for;
    d.worker = spare.id;
    d.waiting_for = "spare worker";
    d.actions = std::move(actions);
    return d;
  }
  if (spare.up() && spare.phase != Phase::trial) return grant(spare, false, actions);
  return grant(shared, false, actions);  // no spare to be had: beside the first start after all
}

ClaimDecision PoolCore::trial_worker(Slots& s, const ClaimRequest& request, ClaimFacts& facts, std::vector<Action>& actions) {
  // A worker where a model new to the pool may make its first session and run its first inference:
  // one where no other job's session lives and no other start runs, so that a crash inside ONNX
  // Runtime there ends nothing of anyone else's. The shared worker while it holds nothing, else the
  // spare (no job holding a session there), else an extra worker of its own.
  ClaimDecision d;
  d.actions = std::move(actions);
  if (facts.own_extra) {
    Worker* extra = lookup(*facts.own_extra);
    if (extra != nullptr && extra->phase == Phase::starting) {
      d.kind = ClaimDecision::Kind::wait_for;
      d.worker = extra->id;
      d.waiting_for = "extra worker";
      return d;
    }
    if (extra != nullptr && extra->up()) return grant(*extra, true, d.actions);
    // No worker of its own could be started for the new model: it starts in the shared worker, unisolated.
    if (extra != nullptr) {
      unslot(*extra);
      retire(*extra, "it failed to start", d.actions);
    }
    facts.own_extra.reset();
    ClaimDecision fallback = grant(at(s.shared), false, d.actions);
    fallback.unisolated = true;
    return fallback;
  }
  Worker& shared = at(s.shared);
  if (shared.up() && shared.blank()) return grant(shared, true, d.actions);
  if (!s.spare) {
    s.spare = spawn(request.device, d.actions);
    at(*s.spare).role = Role::spare;
  }
  Worker& spare = at(*s.spare);
  if (spare.phase == Phase::starting) {
    d.kind = ClaimDecision::Kind::wait_for;
    d.worker = spare.id;
    d.waiting_for = "spare worker";
    return d;
  }
  if (spare.up() && spare.claims == 0) {
    if (spare.models.empty()) return grant(spare, true, d.actions);
    const auto asked = facts.holders.find(spare.id);
    if (asked == facts.holders.end() || asked->second.claims_seen != claims_taken_[spare.id]) {
      d.kind = ClaimDecision::Kind::ask_holders;
      d.worker = spare.id;
      facts.holders[spare.id] = {true, claims_taken_[spare.id]};
      return d;
    }
    if (!asked->second.holds) return grant(spare, true, d.actions);
  }
  const WorkerId extra = spawn(request.device, d.actions);
  at(extra).role = Role::extra;
  s.extra.push_back(extra);
  facts.own_extra = extra;
  d.kind = ClaimDecision::Kind::wait_for;
  d.worker = extra;
  d.waiting_for = "extra worker";
  return d;
}

std::vector<Action> PoolCore::start_done(WorkerId worker, const ModelKey& model) {
  std::vector<Action> actions;
  proven_.insert(model);
  Worker* w = lookup(worker);
  if (w == nullptr || w->phase == Phase::dead) return actions;
  release_claim(*w);
  w->models.insert(model);
  // A new model proved itself on the spare or an extra worker while the shared worker holds nothing:
  // that worker becomes the shared one at once, no session moved.
  Slots& s = slots_.at(w->device);
  const Worker& shared = at(s.shared);
  if (s.shared != worker && w->phase != Phase::retiring && shared.up() && shared.blank() && !stopping_) promote(*w, actions);
  check();
  return actions;
}

bool PoolCore::start_failed(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr || w->phase == Phase::dead) return false;
  release_claim(*w);
  check();
  return slots_.at(w->device).shared != worker;  // the shared worker stays; dead, it is replaced
}

std::vector<Action> PoolCore::found_empty(WorkerId worker, bool empty, bool alive) {
  std::vector<Action> actions;
  Worker* w = lookup(worker);
  if (w == nullptr || !empty || w->claims > 0 || w->phase == Phase::retiring || w->phase == Phase::dead) return actions;
  Slots& s = slots_.at(w->device);
  if (s.shared == worker) return actions;
  w->models.clear();
  if (s.spare == worker && alive) return actions;  // blank again: still the spare
  retire(*w, "its start failed and it holds nothing", actions);
  check();
  return actions;
}

void PoolCore::emptied(WorkerId worker) {
  if (Worker* w = lookup(worker)) w->models.clear();
  check();
}

bool PoolCore::hold(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr || !w->up()) return false;
  take_claim(*w, false);
  check();
  return true;
}

void PoolCore::release(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr || w->phase == Phase::dead || w->phase == Phase::retiring) return;
  release_claim(*w);
  check();
}

// --- idle time -----------------------------------------------------------------------------------------

std::vector<WorkerId> PoolCore::fold_candidates(DeviceIndex device) const {
  const Slots& s = slots_.at(device);
  std::vector<WorkerId> out;
  if (s.spare && !find(*s.spare)->models.empty()) out.push_back(*s.spare);
  out.insert(out.end(), s.extra.begin(), s.extra.end());
  return out;
}

FoldStep PoolCore::fold_begin(WorkerId from) {
  FoldStep step;
  step.from = from;
  Worker* w = lookup(from);
  if (w == nullptr || stopping_) return step;
  Slots& s = slots_.at(w->device);
  const bool in_slot = s.spare == from || std::count(s.extra.begin(), s.extra.end(), from) > 0;
  Worker& shared = at(s.shared);
  if (!in_slot || !w->up() || w->claims > 0) return step;
  // A shared worker that never came up holds nothing: the worker folded in takes its place.
  const bool shared_failed = shared.phase == Phase::failed;
  if (!shared_failed && (!shared.up() || shared.claims > 0)) return step;
  if (shared_failed || shared.blank()) {
    promote(*w, step.actions);
    step.kind = FoldStep::Kind::promoted;
    check();
    return step;
  }
  // Both are claimed while the sessions move: neither parks, retires or takes a model's first start.
  take_claim(*w, false);
  take_claim(shared, false);
  w->folding = true;
  step.kind = FoldStep::Kind::move;
  step.into = shared.id;
  step.restore_from = w->restore_pending;
  step.restore_into = shared.restore_pending;
  check();
  return step;
}

std::vector<Action> PoolCore::fold_done(WorkerId from, WorkerId into, const std::vector<ModelKey>& moved, bool from_empty) {
  std::vector<Action> actions;
  if (Worker* i = lookup(into); i != nullptr && i->phase != Phase::dead) {
    release_claim(*i);
    if (i->phase != Phase::retiring) i->models.insert(moved.begin(), moved.end());
  }
  Worker* w = lookup(from);
  if (w == nullptr || w->phase == Phase::dead || w->phase == Phase::retiring) {
    check();
    return actions;
  }
  w->folding = false;
  release_claim(*w);
  if (from_empty) w->models.clear();
  if (w->blank() && slots_.at(w->device).shared != from) make_spare_or_retire(*w, actions);
  check();
  return actions;
}

std::vector<WorkerId> PoolCore::park_candidates() const {
  std::vector<WorkerId> out;
  for (const auto& s : slots_) {
    std::vector<WorkerId> ids{s.shared};
    if (s.spare) ids.push_back(*s.spare);
    ids.insert(ids.end(), s.extra.begin(), s.extra.end());
    for (WorkerId id : ids) {
      const Worker& w = *find(id);
      if (w.phase == Phase::ready && !w.park_refused) out.push_back(id);
    }
  }
  return out;
}

bool PoolCore::park_begin(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr || stopping_ || w->phase != Phase::ready || w->park_refused) return false;
  w->phase = Phase::parked;
  check();
  return true;
}

void PoolCore::park_failed(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr) return;
  w->park_refused = true;
  w->restore_pending = false;
  if (w->phase == Phase::parked) w->phase = Phase::ready;
  check();
}

bool PoolCore::restore_needed(WorkerId worker) const {
  const Worker* w = find(worker);
  return w != nullptr && w->restore_pending;
}

void PoolCore::restored(WorkerId worker) {
  if (Worker* w = lookup(worker)) {
    w->restore_pending = false;
    if (w->phase == Phase::parked) w->phase = Phase::ready;
  }
  check();
}

// --- what it knows -------------------------------------------------------------------------------------

std::vector<const Worker*> PoolCore::workers_of(DeviceIndex device) const {
  const Slots& s = slots_.at(device);
  std::vector<const Worker*> out{find(s.shared)};
  if (s.spare) out.push_back(find(*s.spare));
  for (WorkerId id : s.extra) out.push_back(find(id));
  return out;
}

std::vector<const Worker*> PoolCore::retiring() const {
  std::vector<const Worker*> out;
  for (const auto& [id, w] : workers_) {
    if (w.phase == Phase::retiring) out.push_back(&w);
  }
  return out;
}

const Worker& PoolCore::shared(DeviceIndex device) const { return *find(slots_.at(device).shared); }

std::optional<std::string> PoolCore::violation() const {
  const auto broken = [](WorkerId id, const std::string& what) { return "worker " + std::to_string(id) + ": " + what; };
  std::map<WorkerId, int> slotted;
  for (DeviceIndex d = 0; d < slots_.size(); ++d) {
    const Slots& s = slots_[d];
    std::vector<std::pair<WorkerId, Role>> ids{{s.shared, Role::shared}};
    if (s.spare) ids.emplace_back(*s.spare, Role::spare);
    for (WorkerId id : s.extra) ids.emplace_back(id, Role::extra);
    for (const auto& [id, role] : ids) {
      const Worker* w = find(id);
      if (w == nullptr) return "device " + std::to_string(d) + ": its " + to_string(role) + " slot names a forgotten worker " + std::to_string(id);
      if (++slotted[id] > 1) return broken(id, "holds two roles");
      if (w->device != d) return broken(id, "is in a slot of another device");
      if (w->role != role) return broken(id, std::string("is the ") + to_string(role) + " but says it is the " + to_string(w->role));
      if (!stopping_ && (w->phase == Phase::retiring || w->phase == Phase::dead)) return broken(id, std::string("is ") + to_string(w->phase) + " in a role");
      if (role == Role::spare && !options_.isolate_new_models) return broken(id, "is a spare in a pool that isolates no model");
    }
  }
  for (const auto& [id, w] : workers_) {
    if (w.claims < 0) return broken(id, "has fewer than no claims");
    const bool claimed = w.phase == Phase::claimed || w.phase == Phase::trial;
    if (claimed != (w.claims > 0) && w.phase != Phase::retiring && w.phase != Phase::dead) {
      return broken(id, std::string("is ") + to_string(w.phase) + " with " + std::to_string(w.claims) + " claim(s)");
    }
    if (w.claims > 0 && (w.phase == Phase::parked || w.phase == Phase::retiring || w.phase == Phase::starting || w.phase == Phase::failed)) {
      return broken(id, std::string("is claimed and ") + to_string(w.phase));
    }
    if (w.restore_pending && w.claims == 0 && w.phase != Phase::retiring && w.phase != Phase::dead) return broken(id, "awaits a restore nobody asked for");
    if (w.folding && w.claims == 0) return broken(id, "folds unclaimed");
    if (slotted.count(id) == 0 && w.phase != Phase::retiring) return broken(id, std::string("is ") + to_string(w.phase) + " without a role");
  }
  return std::nullopt;
}

void PoolCore::check() {
  if (!on_violation_) return;
  if (const auto broken = violation()) on_violation_(*broken);
}

}  // namespace ortfleet::detail::pool
