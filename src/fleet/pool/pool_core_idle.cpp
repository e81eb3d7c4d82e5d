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

}  // namespace ortfleet::detail::pool
