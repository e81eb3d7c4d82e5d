// The warm pool's decisions on starts: where one goes, and what its outcome changes (pool_core.hpp).
#include "fleet/pool/pool_core.hpp"

#include <algorithm>

namespace ortfleet::detail::pool {

// --- starts --------------------------------------------------------------------------------------------

ClaimDecision PoolCore::claim(const ClaimRequest& request, ClaimFacts& facts) {
  ClaimDecision refused;
  if (stopping_) {
    refused.refusal = ClaimDecision::Refusal::stopping;
    return refused;
  }
  std::vector<Action> actions = forget_old_contents(request.model);
  Slots& s = slots_.at(request.device);
  resume_spare(request.device);  // used again: a parked device's spare is made again (maintain)
  const bool proven = proven_.count(request.model) != 0;
  // A model resident in a worker that is up is handed out there at once: never behind a shared worker
  // still starting (the pool a job leaves starts its own while the job's workers come over).
  const auto resident_home = [&]() -> Worker* {
    std::vector<WorkerId> ids{s.shared};
    if (s.spare) ids.push_back(*s.spare);
    ids.insert(ids.end(), s.extra.begin(), s.extra.end());
    for (WorkerId id : ids) {
      Worker& w = at(id);
      // Where its session was unloaded before parking, it is made there again (from the cache entry).
      if (w.up() && w.phase != Phase::trial && (w.models.count(request.model) != 0 || w.unloaded.count(request.model) != 0)) return &w;
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
  w->unloaded.erase(model);
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
  if (Worker* w = lookup(worker)) {
    w->models.clear();
    w->unloaded.clear();  // an evict drops what was to be made again too
  }
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

}  // namespace ortfleet::detail::pool
