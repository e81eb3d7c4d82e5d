// The warm pool's decisions in idle time: folding in and parking (pool_core.hpp).
#include "fleet/pool/pool_core.hpp"

#include <algorithm>

namespace ortfleet::detail::pool {

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
    if (i->phase != Phase::retiring) {
      for (const ModelKey& m : moved) {
        i->unloaded.erase(m);  // made there now
        i->models.insert(m);
      }
    }
  }
  Worker* w = lookup(from);
  if (w == nullptr || w->phase == Phase::dead || w->phase == Phase::retiring) {
    check();
    return actions;
  }
  w->folding = false;
  release_claim(*w);
  if (from_empty) {
    w->models.clear();
    // What it was to make again from the cache entry, the shared worker makes now, where it was not moved.
    if (Worker* i = lookup(into); i != nullptr && i->phase != Phase::dead && i->phase != Phase::retiring) {
      for (const ModelKey& m : w->unloaded) {
        if (i->models.count(m) == 0) i->unloaded.insert(m);
      }
    }
    w->unloaded.clear();
  }
  if (w->blank() && slots_.at(w->device).shared != from) make_spare_or_retire(*w, actions);
  check();
  return actions;
}

std::vector<WorkerId> PoolCore::park_candidates() const {
  std::vector<WorkerId> out;
  for (const auto& s : slots_) {
    if (s.ahead) continue;  // a job's client said it comes: nothing of the device parks until the next round
    const Worker& shared = *find(s.shared);
    const bool shared_parks = shared.phase == Phase::ready && !shared.park_refused;
    std::vector<WorkerId> ids{s.shared};
    // A blank spare is not parked beside a shared worker that parks: it is stopped once that one has.
    if (s.spare && !(shared_parks && find(*s.spare)->blank())) ids.push_back(*s.spare);
    ids.insert(ids.end(), s.extra.begin(), s.extra.end());
    for (WorkerId id : ids) {
      const Worker& w = *find(id);
      if (w.phase == Phase::ready && !w.park_refused) out.push_back(id);
    }
  }
  return out;
}

std::vector<WorkerId> PoolCore::park_round() {
  for (auto& s : slots_) s.ahead = false;  // idle for the park time since the restore ahead: its job did not come
  check();
  return park_candidates();
}

bool PoolCore::park_begin(WorkerId worker) {
  Worker* w = lookup(worker);
  if (w == nullptr || stopping_ || w->phase != Phase::ready || w->park_refused || slots_.at(w->device).ahead) return false;
  w->phase = Phase::parked;
  check();
  return true;
}

void PoolCore::unloaded_for_parking(WorkerId worker, const std::vector<ModelKey>& dropped) {
  Worker* w = lookup(worker);
  if (w == nullptr || w->phase == Phase::dead || w->phase == Phase::retiring) return;
  for (const ModelKey& m : dropped) {
    if (w->models.erase(m) != 0) w->unloaded.insert(m);
  }
  check();
}

std::vector<Action> PoolCore::parked(WorkerId worker) {
  std::vector<Action> actions;
  Worker* w = lookup(worker);
  // Claimed while its checkpoint ran: the device is in use, and keeps its spare.
  if (w == nullptr || w->phase != Phase::parked || stopping_) return actions;
  Slots& s = slots_.at(w->device);
  if (s.shared != worker || !options_.isolate_new_models) return actions;
  if (s.spare) {
    Worker& spare = at(*s.spare);
    // One that holds what a job left (not folded in) stays; so does one a start has claimed.
    if (!spare.models.empty() || spare.claims > 0) return actions;
    retire(spare, "its device parked: a spare is made again once the device is used", actions);
  }
  s.spare_paused = true;
  check();
  return actions;
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

// --- restoring ahead of a job ----------------------------------------------------------------------------

RestoreAhead PoolCore::restore_ahead(DeviceIndex device, const std::optional<ModelKey>& model) {
  RestoreAhead out;
  if (stopping_ || device >= slots_.size()) return out;
  Slots& s = slots_[device];
  s.ahead = true;        // from now until the next park round, nothing of the device parks
  resume_spare(device);  // and it gets its spare again (maintain)
  std::vector<WorkerId> ids{s.shared};
  if (s.spare) ids.push_back(*s.spare);
  ids.insert(ids.end(), s.extra.begin(), s.extra.end());
  for (WorkerId id : ids) {
    Worker& w = at(id);
    // Made again only where no model's first start runs (a trial stays alone) and the worker is up.
    const bool remake = model && !out.remake_on && w.up() && w.phase != Phase::trial && w.unloaded.count(*model) != 0;
    if (w.phase != Phase::parked && !remake) continue;
    take_claim(w, false);  // held like a claim: a checkpoint in progress is restored once it is done
    out.held.push_back(id);
    if (remake) out.remake_on = id;
  }
  check();
  return out;
}

void PoolCore::remade(WorkerId worker, const ModelKey& model, bool made) {
  Worker* w = lookup(worker);
  if (w == nullptr || w->phase == Phase::dead || w->phase == Phase::retiring) return;
  if (w->unloaded.erase(model) != 0 && made) w->models.insert(model);
  check();
}

}  // namespace ortfleet::detail::pool
