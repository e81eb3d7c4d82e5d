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
  if (!s.spare && !s.spare_paused && options_.isolate_new_models && !stopping_ && w.phase != Phase::failed) {
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
    std::erase_if(w.unloaded, [&](const ModelKey& m) { return m.path == model.path && m.content != model.content; });
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
  resume_spare(device);   // a job used the device
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
    // None while the device is parked either: made again once it is used (a claim, a restore ahead),
    // after its shared worker's restore (a new process's start would contend with it in the driver).
    const bool restored = shared.phase != Phase::parked && !shared.restore_pending;
    if (options_.isolate_new_models && spare == nullptr && !shared.models.empty() && shared.up() && restored && !s.spare_paused) {
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
      if (role == Role::spare && s.spare_paused && !stopping_) return broken(id, "is a spare of a device that keeps none while it is parked");
      if (s.ahead && w->phase == Phase::parked) return broken(id, "is parked on a device restored ahead of a job");
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
    for (const ModelKey& m : w.unloaded) {
      // A session whose weights were dropped is never handed out: its model is not resident there.
      if (w.models.count(m) != 0) return broken(id, "holds " + m.path + " both resident and unloaded");
    }
    if (slotted.count(id) == 0 && w.phase != Phase::retiring) return broken(id, std::string("is ") + to_string(w.phase) + " without a role");
  }
  return std::nullopt;
}

void PoolCore::check() {
  if (!on_violation_) return;
  if (const auto broken = violation()) on_violation_(*broken);
}

}  // namespace ortfleet::detail::pool
