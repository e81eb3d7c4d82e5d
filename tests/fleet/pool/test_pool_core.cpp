// The warm pool's decisions without a process (fleet/pool/pool_core.hpp): tables of event sequences
// and what they must decide, and random event sequences (a claim arriving during an idle tick among
// them) with every invariant checked after every event. Runs in milliseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fleet/pool/pool_core.hpp"

namespace ortfleet::detail::pool {
namespace {

/// A core whose invariants throw when broken.
PoolCore make_core(size_t devices = 1, bool isolate = true) {
  return PoolCore({devices, isolate}, [](const std::string& broken) { throw std::logic_error("invariant broken: " + broken); });
}

ModelKey model(const std::string& name, const std::string& content = "1") { return {name + ".onnx", content}; }

/// The ids of the workers the actions spawn.
std::vector<WorkerId> spawned(const std::vector<Action>& actions) {
  std::vector<WorkerId> out;
  for (const auto& a : actions) {
    if (a.kind == Action::Kind::spawn) out.push_back(a.spawn.worker);
  }
  return out;
}

size_t count(const std::vector<Action>& actions, Action::Kind kind) {
  return static_cast<size_t>(std::count_if(actions.begin(), actions.end(), [kind](const Action& a) { return a.kind == kind; }));
}

/// Roles and phases of a device's workers, "shared:ready spare:starting ...".
std::string shape(const PoolCore& core, DeviceIndex device = 0) {
  std::string out;
  for (const Worker* w : core.workers_of(device)) out += std::string(out.empty() ? "" : " ") + to_string(w->role) + ":" + to_string(w->phase);
  return out;
}

/// Claims `m` on `device` and follows the decision as the executor would, with every worker that it
/// waits for coming up and the spare's holders as `spare_holds` says; the final decision.
ClaimDecision claim_through(PoolCore& core, const ModelKey& m, DeviceIndex device = 0, bool spare_holds = false) {
  ClaimFacts facts;
  for (int step = 0; step < 10; ++step) {
    ClaimDecision d = core.claim({device, m}, facts);
    if (d.kind == ClaimDecision::Kind::wait_for) {
      core.worker_up(d.worker);
    } else if (d.kind == ClaimDecision::Kind::ask_holders) {
      facts.holders[d.worker].holds = spare_holds;
    } else {
      return d;
    }
  }
  throw std::logic_error("a claim did not settle in 10 steps");
}

/// A fresh one-device pool whose shared worker is up.
PoolCore ready_pool(bool isolate = true) {
  PoolCore core = make_core(1, isolate);
  core.worker_up(core.initial_actions().front().spawn.worker);
  return core;
}

}  // namespace

TEST(PoolCore, AFreshPoolSpawnsOneSharedWorkerPerDeviceAndAClaimWaitsForIt) {
  PoolCore core = make_core(3);
  EXPECT_EQ(spawned(core.initial_actions()).size(), 3u);
  for (DeviceIndex d = 0; d < 3; ++d) EXPECT_EQ(shape(core, d), "shared:starting");
  ClaimFacts facts;
  const ClaimDecision d = core.claim({1, model("a")}, facts);
  EXPECT_EQ(d.kind, ClaimDecision::Kind::wait_for);
  EXPECT_EQ(d.worker, core.shared(1).id);
  core.worker_failed(core.shared(2).id);
  EXPECT_EQ(core.claim({2, model("a")}, facts).refusal, ClaimDecision::Refusal::device_failed);
}

// The shapes a device takes, as tables: each row a model's start and what the device looks like after.
TEST(PoolCore, NewModelsNeverStartBesideAnotherJobsSessionAndProvenOnesGoWhereTheyAreResident) {
  PoolCore core = ready_pool();
  const WorkerId shared = core.shared(0).id;
  // The first new model: in the shared worker, which held nothing, as a trial.
  ClaimDecision a = claim_through(core, model("a"));
  EXPECT_EQ(a.worker, shared);
  EXPECT_TRUE(a.trial);
  EXPECT_EQ(shape(core), "shared:trial");
  // A second new model meanwhile: never beside a's trial; a spare is started for it.
  ClaimDecision b = claim_through(core, model("b"));
  EXPECT_NE(b.worker, shared);
  EXPECT_EQ(shape(core), "shared:trial spare:trial");
  core.start_done(a.worker, model("a"));
  core.start_done(b.worker, model("b"));
  EXPECT_EQ(shape(core), "shared:ready spare:ready");
  // A third new model while the spare holds b's session, which a job still holds: an extra of its own.
  ClaimDecision c = claim_through(core, model("c"), 0, /*spare_holds=*/true);
  EXPECT_TRUE(c.trial);
  EXPECT_EQ(shape(core), "shared:ready spare:ready extra:trial");
  // Nobody holds b's session any more: the next new model may go to the spare.
  ClaimDecision d = claim_through(core, model("d"), 0, /*spare_holds=*/false);
  EXPECT_EQ(d.worker, b.worker);
  core.start_done(c.worker, model("c"));
  core.start_done(d.worker, model("d"));
  // Proven models go where they are resident, shared or not.
  EXPECT_EQ(claim_through(core, model("a")).worker, shared);
  EXPECT_EQ(claim_through(core, model("b")).worker, b.worker);
  EXPECT_EQ(claim_through(core, model("c")).worker, c.worker);
}

TEST(PoolCore, TheTableOfWhereAStartGoes) {
  struct Row {
    const char* name;
    bool isolate;
    std::vector<std::string> before;  // models started and done, in order
    std::string start;
    std::string goes_to;  // the role of the worker the start is granted on
    bool trial;
  };
  const std::vector<Row> rows = {
      {"a fresh pool's first model", true, {}, "a", "shared", true},
      {"a proven model", true, {"a"}, "a", "shared", false},
      {"a new model beside a proven one", true, {"a"}, "b", "spare", true},
      {"a new model in a pool that isolates none", false, {"a"}, "b", "shared", false},
      {"a model proven on the spare", true, {"a", "b"}, "b", "spare", false},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    PoolCore core = ready_pool(row.isolate);
    for (const auto& m : row.before) {
      const ClaimDecision d = claim_through(core, model(m));
      core.start_done(d.worker, model(m));
      std::vector<Action> actions;
      core.maintain(actions);
      for (WorkerId w : spawned(actions)) core.worker_up(w);
    }
    const ClaimDecision d = claim_through(core, model(row.start));
    ASSERT_EQ(d.kind, ClaimDecision::Kind::granted);
    EXPECT_EQ(to_string(core.find(d.worker)->role), row.goes_to);
    EXPECT_EQ(d.trial, row.trial);
  }
}

TEST(PoolCore, ASpareComesWhileTheSharedWorkerHoldsModelsAndGoesWhenItHoldsNone) {
  PoolCore core = ready_pool();
  const ClaimDecision a = claim_through(core, model("a"));
  core.start_done(a.worker, model("a"));
  std::vector<Action> actions;
  core.maintain(actions);
  ASSERT_EQ(spawned(actions).size(), 1u);
  core.worker_up(spawned(actions).front());
  EXPECT_EQ(shape(core), "shared:ready spare:ready");
  core.emptied(a.worker);  // an evict dropped a's session
  actions.clear();
  core.maintain(actions);
  ASSERT_EQ(count(actions, Action::Kind::stop), 1u);
  EXPECT_EQ(shape(core), "shared:ready");
  core.stopped(actions.front().stop.worker);
  EXPECT_TRUE(core.retiring().empty());
}

TEST(PoolCore, ADeadSharedWorkerIsReplacedByABlankSpareOrANewWorker) {
  PoolCore core = ready_pool();
  const WorkerId first = core.shared(0).id;
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  std::vector<Action> actions;
  core.maintain(actions);
  const WorkerId spare = spawned(actions).front();
  core.worker_up(spare);
  EXPECT_TRUE(core.worker_died(first).empty()) << "the blank spare takes its place: nothing spawned";
  EXPECT_EQ(core.shared(0).id, spare);
  EXPECT_EQ(core.shared(0).restarts, 1);
  actions.clear();
  EXPECT_EQ(core.maintain(actions), 1);
  // The new shared worker dies while it holds nothing and there is no spare: a new one starts.
  const auto replaced = core.worker_died(spare);
  ASSERT_EQ(spawned(replaced).size(), 1u);
  EXPECT_EQ(shape(core), "shared:starting");
  EXPECT_EQ(core.shared(0).restarts, 2);
  // A model resident nowhere any more is new again... but proven: it waits for the new shared worker.
  ClaimFacts facts;
  EXPECT_EQ(core.claim({0, model("a")}, facts).kind, ClaimDecision::Kind::wait_for);
}

TEST(PoolCore, AResidentModelNeverWaitsForASharedWorkerStillStarting) {
  PoolCore core = ready_pool();
  std::vector<Action> actions;
  const WorkerId handed = core.adopted(0, model("a"), actions);
  EXPECT_EQ(core.shared(0).id, handed) << "the shared worker held nothing: the job's worker takes its place";
  core.start_done(claim_through(core, model("b")).worker, model("b"));  // b: new, on the spare (the old shared)
  core.worker_died(handed);  // the shared worker dies; its replacement starts
  ClaimFacts facts;
  const ClaimDecision b = core.claim({0, model("b")}, facts);
  EXPECT_EQ(b.kind, ClaimDecision::Kind::granted);
}

// The park-during-claim race (issue 58): the idle tick chose the workers to park, then took seconds
// (folding in, asking, trimming) while a job claimed one of them. It is not parked; a claim that comes
// after the park began gets the worker restored first, and one that lets go before the restore
// leaves it parked.
TEST(PoolCore, AClaimDuringAnIdleTickKeepsItsWorkerFromParking) {
  PoolCore core = ready_pool();
  const WorkerId shared = core.shared(0).id;
  const auto candidates = core.park_candidates();
  ASSERT_EQ(candidates, std::vector<WorkerId>{shared});
  const ClaimDecision job = claim_through(core, model("a"));  // arrives during the tick
  ASSERT_EQ(job.worker, shared);
  EXPECT_FALSE(job.restore);
  EXPECT_FALSE(core.park_begin(shared)) << "a claimed worker parked";
  EXPECT_EQ(shape(core), "shared:trial");
  core.start_done(shared, model("a"));
  // Parked before the claim: the claim restores it first.
  ASSERT_TRUE(core.park_begin(shared));
  EXPECT_EQ(shape(core), "shared:parked");
  const ClaimDecision next = claim_through(core, model("a"));
  EXPECT_TRUE(next.restore);
  EXPECT_TRUE(core.restore_needed(shared));
  core.restored(shared);
  EXPECT_FALSE(core.restore_needed(shared));
  core.start_done(shared, model("a"));
  EXPECT_EQ(shape(core), "shared:ready");
  // A park that the driver refused is not tried again until the worker is used.
  ASSERT_TRUE(core.park_begin(shared));
  core.park_failed(shared);
  EXPECT_TRUE(core.park_candidates().empty());
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  EXPECT_EQ(core.park_candidates(), std::vector<WorkerId>{shared});
}

TEST(PoolCore, FoldingMovesWhatJobsLeftIntoTheSharedWorkerAndKeepsTwoWorkers) {
  PoolCore core = ready_pool();
  const WorkerId shared = core.shared(0).id;
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  std::vector<WorkerId> extras;
  for (const char* m : {"b", "c", "d"}) {
    const ClaimDecision d = claim_through(core, model(m), 0, /*spare_holds=*/true);
    extras.push_back(d.worker);
  }
  for (size_t i = 0; i < extras.size(); ++i) core.start_done(extras[i], model(std::string(1, static_cast<char>('b' + i))));
  std::vector<Action> adopted;
  extras.push_back(core.adopted(0, model("e"), adopted));
  ASSERT_GE(core.workers_of(0).size(), 4u) << shape(core);
  std::vector<Action> stops;
  for (WorkerId from : core.fold_candidates(0)) {
    const FoldStep step = core.fold_begin(from);
    if (step.kind != FoldStep::Kind::move) continue;
    EXPECT_EQ(step.into, shared);
    EXPECT_EQ(core.find(from)->phase, Phase::claimed) << "both are claimed while sessions move";
    EXPECT_EQ(core.find(shared)->phase, Phase::claimed);
    const auto parkable = core.park_candidates();
    EXPECT_EQ(std::find(parkable.begin(), parkable.end(), from), parkable.end()) << "a folding worker may park";
    std::vector<ModelKey> moved(core.find(from)->models.begin(), core.find(from)->models.end());
    const auto actions = core.fold_done(from, step.into, moved, /*from_empty=*/true);
    stops.insert(stops.end(), actions.begin(), actions.end());
  }
  EXPECT_EQ(shape(core), "shared:ready spare:ready");
  EXPECT_EQ(core.find(shared)->models.size(), 5u);
  EXPECT_EQ(count(stops, Action::Kind::stop), 3u);
  for (const auto& m : {"a", "b", "c", "d", "e"}) EXPECT_EQ(claim_through(core, model(m)).worker, shared) << m;
}

TEST(PoolCore, AFailedStartLeavesNoWorkerOfItsOwnButTheSpareStays) {
  PoolCore core = ready_pool();
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  const ClaimDecision spare = claim_through(core, model("broken1"));
  ASSERT_TRUE(core.start_failed(spare.worker));
  EXPECT_TRUE(core.found_empty(spare.worker, /*empty=*/true, /*alive=*/true).empty());
  EXPECT_EQ(shape(core), "shared:ready spare:ready");
  const ClaimDecision held = claim_through(core, model("b"));
  core.start_done(held.worker, model("b"));
  const ClaimDecision extra = claim_through(core, model("broken2"), 0, /*spare_holds=*/true);
  ASSERT_TRUE(core.start_failed(extra.worker));
  const auto stops = core.found_empty(extra.worker, true, true);
  ASSERT_EQ(count(stops, Action::Kind::stop), 1u);
  EXPECT_EQ(stops.front().stop.worker, extra.worker);
  EXPECT_EQ(shape(core), "shared:ready spare:ready");
  // The shared worker's own failed start changes nothing.
  const ClaimDecision on_shared = claim_through(core, model("a"));
  EXPECT_FALSE(core.start_failed(on_shared.worker));
}

TEST(PoolCore, AnExtraWorkerThatFailsToStartSendsItsModelToTheSharedWorkerUnisolated) {
  PoolCore core = ready_pool();
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  ClaimFacts facts;
  ClaimDecision d = core.claim({0, model("b")}, facts);
  ASSERT_EQ(d.kind, ClaimDecision::Kind::wait_for);  // the spare
  core.worker_up(d.worker);
  core.start_done(claim_through(core, model("c")).worker, model("c"));  // the spare holds c now
  ClaimFacts own;
  d = core.claim({0, model("b")}, own);
  ASSERT_EQ(d.kind, ClaimDecision::Kind::ask_holders);
  own.holders[d.worker].holds = true;
  d = core.claim({0, model("b")}, own);
  ASSERT_EQ(d.kind, ClaimDecision::Kind::wait_for);
  EXPECT_STREQ(d.waiting_for, "extra worker");
  core.worker_failed(d.worker);
  d = core.claim({0, model("b")}, own);
  ASSERT_EQ(d.kind, ClaimDecision::Kind::granted);
  EXPECT_TRUE(d.unisolated);
  EXPECT_EQ(d.worker, core.shared(0).id);
  EXPECT_EQ(shape(core), "shared:claimed spare:ready");
}

TEST(PoolCore, AJobsWorkerHandedOverTakesTheBlankSharedWorkersPlaceOrWaitsAsAnExtra) {
  PoolCore core = make_core(1);  // the shared worker still starts
  const WorkerId starting = core.shared(0).id;
  std::vector<Action> actions;
  const WorkerId first = core.adopted(0, model("a"), actions);
  EXPECT_EQ(core.shared(0).id, first);
  EXPECT_EQ(shape(core), "shared:ready spare:starting") << "the old shared worker, still starting, is the spare";
  core.worker_up(starting);
  const WorkerId second = core.adopted(0, model("b"), actions);
  EXPECT_EQ(shape(core), "shared:ready spare:ready extra:ready");
  EXPECT_EQ(claim_through(core, model("b")).worker, second);
}

// A model file rewritten in place (issue 59): its old sessions are dropped where nobody holds them,
// never left beside the new one until the pool exits.
TEST(PoolCore, AModelRewrittenInPlaceDropsItsOldSessions) {
  PoolCore core = ready_pool();
  const ClaimDecision old = claim_through(core, model("m", "old"));
  core.start_done(old.worker, model("m", "old"));
  ClaimFacts facts;
  const ClaimDecision renewed = core.claim({0, model("m", "new")}, facts);
  ASSERT_EQ(count(renewed.actions, Action::Kind::drop_model), 1u);
  const auto drop = std::find_if(renewed.actions.begin(), renewed.actions.end(), [](const Action& a) { return a.kind == Action::Kind::drop_model; });
  EXPECT_EQ(drop->drop.worker, old.worker);
  EXPECT_EQ(drop->drop.path, "m.onnx");
  EXPECT_FALSE(core.proven(model("m", "old")));
  EXPECT_EQ(core.find(old.worker)->models.count(model("m", "old")), 0u);
  // Other models, and the same content under another name, are left alone.
  const ClaimDecision other = claim_through(core, model("other", "old"));
  EXPECT_EQ(count(other.actions, Action::Kind::drop_model), 0u);
}

TEST(PoolCore, AStoppingPoolRefusesStartsAndStopsWorkersThatComeUp) {
  PoolCore core = make_core(2);
  core.worker_up(core.shared(0).id);
  core.stopping();
  ClaimFacts facts;
  EXPECT_EQ(core.claim({0, model("a")}, facts).refusal, ClaimDecision::Refusal::stopping);
  const auto up = core.worker_up(core.shared(1).id);
  ASSERT_EQ(count(up, Action::Kind::stop), 1u);
  std::vector<Action> actions;
  EXPECT_EQ(core.maintain(actions), 0);
  EXPECT_TRUE(actions.empty());
}

TEST(PoolCore, APoolThatIsolatesNothingKeepsOneWorkerPerDevice) {
  PoolCore core = ready_pool(/*isolate=*/false);
  for (const char* m : {"a", "b", "c"}) {
    const ClaimDecision d = claim_through(core, model(m));
    EXPECT_EQ(d.worker, core.shared(0).id);
    EXPECT_FALSE(d.trial);
  }
  std::vector<Action> actions;
  core.maintain(actions);
  EXPECT_TRUE(actions.empty());
}

TEST(PoolCore, ABrokenInvariantIsReported) {
  std::vector<std::string> said;
  PoolCore core({1, true}, [&](const std::string& broken) { said.push_back(broken); });
  core.worker_up(core.shared(0).id);
  core.start_done(core.shared(0).id, model("a"));  // a report of a start never handed out
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("never given"), std::string::npos) << said[0];
}

// --- a warm node (issue 60): no spare while parked, sessions unloaded before parking, restores ahead ---

namespace {
/// A one-device pool whose shared worker holds `a` (proven) and whose spare is up.
PoolCore pool_with_a_and_its_spare() {
  PoolCore core = ready_pool();
  core.start_done(claim_through(core, model("a")).worker, model("a"));
  std::vector<Action> actions;
  core.maintain(actions);
  for (WorkerId w : spawned(actions)) core.worker_up(w);
  return core;
}
}  // namespace

TEST(PoolCore, AParkedDeviceKeepsNoSpareAndMakesItAgainOnceUsed) {
  PoolCore core = pool_with_a_and_its_spare();
  const WorkerId shared = core.shared(0).id;
  ASSERT_EQ(shape(core), "shared:ready spare:ready");
  // The blank spare does not park beside its shared worker: it is stopped once that one has parked.
  EXPECT_EQ(core.park_round(), std::vector<WorkerId>{shared});
  ASSERT_TRUE(core.park_begin(shared));
  const auto stops = core.parked(shared);
  ASSERT_EQ(count(stops, Action::Kind::stop), 1u);
  EXPECT_FALSE(stops.front().stop.by_signal) << "the spare was not parked: it stops by request";
  EXPECT_EQ(shape(core), "shared:parked");
  EXPECT_TRUE(core.spare_paused(0));
  std::vector<Action> actions;
  core.maintain(actions);
  EXPECT_TRUE(spawned(actions).empty()) << "a spare was started for a parked device";
  // A job's claim restores the shared worker, and the spare is made again beside it, once the restore is done.
  const ClaimDecision job = claim_through(core, model("a"));
  EXPECT_TRUE(job.restore);
  core.maintain(actions);
  EXPECT_TRUE(spawned(actions).empty()) << "a spare was started while the shared worker awaits its restore";
  core.restored(shared);
  core.maintain(actions);
  EXPECT_EQ(spawned(actions).size(), 1u);
  EXPECT_FALSE(core.spare_paused(0));
}

TEST(PoolCore, ASpareHoldingWhatAJobLeftIsKeptWhenTheDeviceParks) {
  PoolCore core = pool_with_a_and_its_spare();
  const ClaimDecision b = claim_through(core, model("b"));  // new: on the spare
  core.start_done(b.worker, model("b"));
  const WorkerId shared = core.shared(0).id;
  const auto candidates = core.park_round();
  EXPECT_EQ(candidates.size(), 2u) << "a spare that holds sessions parks too";
  ASSERT_TRUE(core.park_begin(shared));
  EXPECT_TRUE(core.parked(shared).empty());
  EXPECT_FALSE(core.spare_paused(0));
}

// A restore ahead (a job's client said it will use the device) is a claim-like event: it holds every
// parked worker of the device, so that one whose checkpoint runs is restored once it is done, and
// nothing of the device parks until the next round.
TEST(PoolCore, ARestoreAheadWinsOverAParkInProgressAndKeepsTheDeviceUpUntilTheNextRound) {
  PoolCore core = make_core(2);
  for (DeviceIndex d = 0; d < 2; ++d) core.worker_up(core.shared(d).id);
  const WorkerId zero = core.shared(0).id;
  const WorkerId one = core.shared(1).id;
  const auto candidates = core.park_round();
  ASSERT_EQ(candidates.size(), 2u);
  ASSERT_TRUE(core.park_begin(zero));  // its checkpoint runs...
  const RestoreAhead ahead = core.restore_ahead(0, std::nullopt);  // ... when the job's client says it comes
  ASSERT_EQ(ahead.held, std::vector<WorkerId>{zero});
  EXPECT_FALSE(ahead.remake_on);
  EXPECT_TRUE(core.restore_needed(zero)) << "restored once the checkpoint is done";
  EXPECT_TRUE(core.parked(zero).empty()) << "a held worker's device keeps its spare";
  core.restored(zero);
  core.release(zero);
  EXPECT_EQ(shape(core, 0), "shared:ready");
  EXPECT_FALSE(core.park_begin(zero)) << "a device restored ahead parked within the same round";
  EXPECT_TRUE(core.park_begin(one)) << "another device parks as before";
  EXPECT_TRUE(core.restored_ahead(0));
  EXPECT_TRUE(core.park_candidates().empty());
  // Its job did not come: the next round (the pool idle for its park time again) parks it.
  EXPECT_EQ(core.park_round(), std::vector<WorkerId>{zero});
  EXPECT_FALSE(core.restored_ahead(0));
  EXPECT_TRUE(core.park_begin(zero));
}

TEST(PoolCore, ARestoreAheadOfAReadyDeviceHoldsNothingAndAJobsClaimAfterItRestoresNothing) {
  PoolCore core = pool_with_a_and_its_spare();
  const RestoreAhead ahead = core.restore_ahead(0, model("a"));
  EXPECT_TRUE(ahead.held.empty());
  const ClaimDecision job = claim_through(core, model("a"));
  EXPECT_FALSE(job.restore);
  EXPECT_EQ(job.worker, core.shared(0).id);
}

// Sessions too large to keep through the driver's checkpoint are dropped before it (their weights are
// uploaded again from the cache entry faster than the driver restores them): the model is unloaded,
// never resident, so no start is handed a session whose weights are gone; a restore ahead of its job,
// or its next start, makes it again on that worker.
TEST(PoolCore, AModelUnloadedBeforeParkingIsMadeAgainWhereItWas) {
  PoolCore core = pool_with_a_and_its_spare();
  const WorkerId shared = core.shared(0).id;
  core.park_round();
  ASSERT_TRUE(core.park_begin(shared));
  core.unloaded_for_parking(shared, {model("a"), model("never-there")});
  EXPECT_EQ(core.find(shared)->models.count(model("a")), 0u);
  EXPECT_EQ(core.find(shared)->unloaded, std::set<ModelKey>{model("a")});
  core.parked(shared);
  // Restored ahead of a's job: the worker is held, restored, and a made again there.
  const RestoreAhead ahead = core.restore_ahead(0, model("a"));
  ASSERT_EQ(ahead.held, std::vector<WorkerId>{shared});
  ASSERT_EQ(ahead.remake_on, shared);
  core.restored(shared);
  core.remade(shared, model("a"), true);
  core.release(shared);
  EXPECT_EQ(core.find(shared)->models.count(model("a")), 1u);
  EXPECT_TRUE(core.find(shared)->unloaded.empty());
  // Unloaded again and restored by the job's own claim: the claim goes where a was, and its start makes it.
  core.park_round();
  ASSERT_TRUE(core.park_begin(shared));
  core.unloaded_for_parking(shared, {model("a")});
  const ClaimDecision job = claim_through(core, model("a"));
  EXPECT_EQ(job.worker, shared);
  EXPECT_TRUE(job.restore);
  core.restored(shared);
  core.start_done(shared, model("a"));
  EXPECT_EQ(core.find(shared)->models.count(model("a")), 1u);
  EXPECT_TRUE(core.find(shared)->unloaded.empty());
}

TEST(PoolCore, AnUnloadedModelRewrittenInPlaceOrEvictedIsNotMadeAgain) {
  PoolCore core = pool_with_a_and_its_spare();
  const WorkerId shared = core.shared(0).id;
  core.park_round();
  ASSERT_TRUE(core.park_begin(shared));
  core.unloaded_for_parking(shared, {model("a")});
  ClaimFacts facts;
  core.claim({0, model("a", "2")}, facts);  // the file changed: the old content is another model
  EXPECT_TRUE(core.find(shared)->unloaded.empty());
  EXPECT_FALSE(core.restore_ahead(0, model("a")).remake_on);
}

// --- random event sequences -----------------------------------------------------------------------------

namespace {

/// Drives a core with random events as the pool's executor and its workers would send them, and
/// checks what each decision did (the core checks its own invariants after every event).
class RandomPool {
 public:
  RandomPool(uint64_t seed, size_t devices, bool isolate) : random_(seed), core_(make_core(devices, isolate)) {
    carry_out(core_.initial_actions());
  }

  void step() {
    switch (pick(16)) {
      case 0:
      case 1:
      case 2: new_claim(); break;
      case 14: restore_ahead(); break;
      case 15: progress_ahead(); break;
      case 3:
      case 4: progress_claim(); break;
      case 5: settle_spawn(); break;
      case 6:
      case 7: finish_start(); break;
      case 8: kill_one(); break;
      case 9: finish_stop(); break;
      case 10: idle_tick(); break;
      case 11: hand_over(); break;
      case 12: maintain(); break;
      default: evict_one(); break;
    }
  }

  /// Everything in flight ends (workers come up, starts finish, stops end), the pool is idle, folds in
  /// and maintains itself: then a device whose shared worker is up keeps at most two workers.
  void come_to_rest() {
    for (int round = 0; round < 50; ++round) {
      while (!claims_.empty()) progress_claim(/*finish=*/true);
      while (!aheads_.empty()) progress_ahead();
      while (!starting_.empty()) settle_spawn(/*up=*/true);
      while (!granted_.empty()) finish_start();
      while (!stopping_.empty()) finish_stop();
      for (DeviceIndex d = 0; d < core_.devices(); ++d) fold(d, /*jobs_hold=*/false);
      maintain();
      if (claims_.empty() && aheads_.empty() && starting_.empty() && granted_.empty() && stopping_.empty()) break;
    }
    for (DeviceIndex d = 0; d < core_.devices(); ++d) {
      if (core_.shared(d).phase != Phase::ready) continue;
      size_t live = 0;
      for (const Worker* w : core_.workers_of(d)) live += w->up() || w->phase == Phase::starting ? 1 : 0;
      if (live > 2) throw std::logic_error("device " + std::to_string(d) + " keeps " + std::to_string(live) + " workers at rest: " + shape(core_, d));
    }
  }

 private:
  struct Pending {
    ClaimRequest request;
    ClaimFacts facts;
  };
  struct Granted {
    WorkerId worker;
    ModelKey model;
  };
  /// A restore ahead in flight: its workers held, each to be restored (and made again on) and let go.
  struct Ahead {
    RestoreAhead decided;
    ModelKey model;
  };

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random_); }
  bool chance(int percent) { return static_cast<int>(pick(100)) < percent; }

  ModelKey random_model() {
    const std::string name = "m" + std::to_string(pick(5));
    return {name, contents_[name]};
  }

  void carry_out(const std::vector<Action>& actions) {
    for (const auto& a : actions) {
      switch (a.kind) {
        case Action::Kind::spawn: starting_.push_back(a.spawn.worker); break;
        case Action::Kind::stop: {
          const Worker* w = core_.find(a.stop.worker);
          if (w != nullptr && w->claims > 0) throw std::logic_error("a claimed worker is stopped: " + std::to_string(a.stop.worker));
          stopping_.push_back(a.stop.worker);
          break;
        }
        case Action::Kind::drop_model:
          if (core_.find(a.drop.worker) == nullptr) throw std::logic_error("a model dropped from a forgotten worker");
          break;
      }
    }
  }

  void new_claim() {
    if (chance(10)) contents_["m" + std::to_string(pick(5))] = std::to_string(pick(1000));  // a model rewritten in place
    claims_.push_back({{pick(core_.devices()), random_model()}, {}});
    progress(claims_.size() - 1, false);
  }

  void progress_claim(bool finish = false) {
    if (!claims_.empty()) progress(pick(claims_.size()), finish);
  }

  void progress(size_t i, bool finish) {
    Pending& p = claims_[i];
    const ClaimDecision d = core_.claim(p.request, p.facts);
    carry_out(d.actions);
    switch (d.kind) {
      case ClaimDecision::Kind::granted: {
        const Worker* w = core_.find(d.worker);
        if (w == nullptr || w->device != p.request.device || w->claims <= 0 || w->phase == Phase::parked) {
          throw std::logic_error("a claim was granted on a worker that is not claimed on its device");
        }
        if (d.restore) {
          if (!core_.restore_needed(d.worker)) throw std::logic_error("a restore was asked of a worker that needs none");
          core_.restored(d.worker);
        }
        granted_.push_back({d.worker, p.request.model});
        claims_.erase(claims_.begin() + static_cast<long>(i));
        break;
      }
      case ClaimDecision::Kind::refused: claims_.erase(claims_.begin() + static_cast<long>(i)); break;
      case ClaimDecision::Kind::ask_holders: p.facts.holders[d.worker].holds = finish ? false : chance(50); break;
      case ClaimDecision::Kind::wait_for: {
        const auto it = std::find(starting_.begin(), starting_.end(), d.worker);
        if (it == starting_.end()) throw std::logic_error("a claim waits for worker " + std::to_string(d.worker) + ", which is not starting");
        if (finish || chance(50)) settle(it, finish || chance(85));
        break;
      }
    }
  }

  void settle_spawn(bool up = false) {
    if (!starting_.empty()) settle(starting_.begin() + static_cast<long>(pick(starting_.size())), up || chance(85));
  }

  void settle(std::vector<WorkerId>::iterator it, bool up) {
    const WorkerId w = *it;
    starting_.erase(it);
    carry_out(up ? core_.worker_up(w) : core_.worker_failed(w));
  }

  void finish_start() {
    if (granted_.empty()) return;
    const size_t i = pick(granted_.size());
    const Granted g = granted_[i];
    granted_.erase(granted_.begin() + static_cast<long>(i));
    if (chance(80)) {
      carry_out(core_.start_done(g.worker, g.model));
    } else if (core_.start_failed(g.worker)) {
      carry_out(core_.found_empty(g.worker, chance(70), chance(90)));
    }
  }

  /// Every worker of every device that is up.
  std::vector<WorkerId> up_workers() const {
    std::vector<WorkerId> up;
    for (DeviceIndex d = 0; d < core_.devices(); ++d) {
      for (const Worker* w : core_.workers_of(d)) {
        if (w->up()) up.push_back(w->id);
      }
    }
    return up;
  }

  void kill_one() {
    const std::vector<WorkerId> up = up_workers();
    if (up.empty()) return;
    const WorkerId victim = up[pick(up.size())];
    carry_out(core_.worker_died(victim));
    std::erase_if(granted_, [victim](const Granted& g) { return g.worker == victim; });  // its starts fail as reports on a forgotten worker
  }

  void finish_stop() {
    if (stopping_.empty()) return;
    const size_t i = pick(stopping_.size());
    core_.stopped(stopping_[i]);
    stopping_.erase(stopping_.begin() + static_cast<long>(i));
  }

  /// An idle tick: folding in, then parking; claims and restores ahead may arrive between any two of
  /// its steps, and a worker parking may first unload some of its models.
  void idle_tick() {
    for (DeviceIndex d = 0; d < core_.devices(); ++d) fold(d, chance(30));
    const auto candidates = core_.park_round();
    std::set<DeviceIndex> ahead;  // restored ahead during this round: nothing of them may park
    for (WorkerId w : candidates) {
      if (chance(30)) new_claim();  // a job arrives while the tick trims and asks
      if (chance(15)) ahead.insert(restore_ahead());  // a job's client says it comes
      const Worker* before = core_.find(w);
      const bool claimed = before == nullptr || before->claims > 0;
      const bool parked = core_.park_begin(w);
      if (parked && claimed) throw std::logic_error("worker " + std::to_string(w) + " parked while claimed");
      if (parked && ahead.count(core_.find(w)->device) != 0) throw std::logic_error("worker " + std::to_string(w) + " parked on a device restored ahead");
      if (!parked) continue;
      if (chance(40)) {
        const auto& models = core_.find(w)->models;
        std::vector<ModelKey> dropped;
        for (const auto& m : models) {
          if (chance(50)) dropped.push_back(m);
        }
        core_.unloaded_for_parking(w, dropped);
      }
      if (chance(15)) ahead.insert(restore_ahead());  // ... or while its checkpoint runs
      if (chance(10)) core_.park_failed(w);
      else carry_out(core_.parked(w));
    }
  }

  /// A job's client says it will use a device (and a model): returns the device.
  DeviceIndex restore_ahead() {
    const DeviceIndex d = pick(core_.devices());
    const ModelKey m = random_model();
    RestoreAhead decided = core_.restore_ahead(d, chance(70) ? std::optional<ModelKey>(m) : std::nullopt);
    for (WorkerId w : decided.held) {
      const Worker* held = core_.find(w);
      if (held == nullptr || held->claims <= 0 || held->phase == Phase::parked) throw std::logic_error("a restore ahead holds worker " + std::to_string(w) + " unclaimed");
    }
    for (const Worker* w : core_.workers_of(d)) {
      if (w->phase == Phase::parked) throw std::logic_error("worker " + std::to_string(w->id) + " stays parked after a restore ahead of its device");
    }
    aheads_.push_back({std::move(decided), m});
    return d;
  }

  /// One restore ahead goes on: its workers restored (as the executor restores: before anything else),
  /// its model made again (or not), and let go.
  void progress_ahead() {
    if (aheads_.empty()) return;
    const size_t i = pick(aheads_.size());
    const Ahead a = aheads_[i];
    aheads_.erase(aheads_.begin() + static_cast<long>(i));
    for (WorkerId w : a.decided.held) {
      if (core_.find(w) == nullptr) continue;  // died meanwhile
      if (core_.restore_needed(w)) core_.restored(w);
      if (a.decided.remake_on == w) core_.remade(w, a.model, chance(80));
      core_.release(w);
    }
  }

  void fold(DeviceIndex d, bool jobs_hold) {
    for (WorkerId from : core_.fold_candidates(d)) {
      const FoldStep step = core_.fold_begin(from);
      carry_out(step.actions);
      if (step.kind != FoldStep::Kind::move) continue;
      if (step.restore_from) core_.restored(step.from);
      if (step.restore_into) core_.restored(step.into);
      if (chance(20)) new_claim();  // a job arrives while the sessions move
      std::vector<ModelKey> moved;
      if (!jobs_hold) {
        const Worker* w = core_.find(from);
        if (w != nullptr) moved.assign(w->models.begin(), w->models.end());
      }
      carry_out(core_.fold_done(step.from, step.into, moved, !jobs_hold));
    }
  }

  void hand_over() {
    std::vector<Action> actions;
    core_.adopted(pick(core_.devices()), random_model(), actions);
    carry_out(actions);
  }

  void maintain() {
    std::vector<Action> actions;
    std::set<DeviceIndex> paused;
    for (DeviceIndex d = 0; d < core_.devices(); ++d) {
      if (core_.spare_paused(d)) paused.insert(d);
    }
    core_.maintain(actions);
    for (const auto& a : actions) {
      if (a.kind == Action::Kind::spawn && paused.count(a.spawn.device) != 0) throw std::logic_error("a spare was started for a parked device");
    }
    carry_out(actions);
  }

  /// An evict: the pool holds a worker (restoring it where it is parked), empties it, lets it go.
  void evict_one() {
    const std::vector<WorkerId> up = up_workers();
    if (up.empty()) return;
    const WorkerId w = up[pick(up.size())];
    if (!core_.hold(w)) throw std::logic_error("an up worker could not be held");
    if (core_.find(w)->phase == Phase::parked) throw std::logic_error("a held worker is parked");
    if (core_.restore_needed(w)) core_.restored(w);
    if (core_.find(w)->claims == 1) core_.emptied(w);  // a worker with starts in flight keeps their sessions
    core_.release(w);
  }

  std::mt19937_64 random_;
  PoolCore core_;
  std::map<std::string, std::string> contents_;
  std::vector<Pending> claims_;
  std::vector<Granted> granted_;
  std::vector<Ahead> aheads_;
  std::vector<WorkerId> starting_;
  std::vector<WorkerId> stopping_;
};

}  // namespace

// >= 1,000 sequences per run (ORTFLEET_POOL_CORE_SEQUENCES sets more), each of a few hundred events on
// one to three devices, isolating or not; a failure names its seed, which replays it alone
// (ORTFLEET_POOL_CORE_SEED).
TEST(PoolCore, RandomEventSequencesKeepEveryInvariant) {
  uint64_t first = 1;
  uint64_t sequences = 1000;
  if (const char* more = std::getenv("ORTFLEET_POOL_CORE_SEQUENCES")) sequences = std::max<uint64_t>(sequences, std::strtoull(more, nullptr, 10));
  if (const char* one = std::getenv("ORTFLEET_POOL_CORE_SEED")) {
    first = std::strtoull(one, nullptr, 10);
    sequences = 1;
  }
  for (uint64_t seed = first; seed < first + sequences; ++seed) {
    std::mt19937_64 shape_of(seed);
    const size_t devices = 1 + shape_of() % 3;
    const bool isolate = shape_of() % 4 != 0;
    const int events = 100 + static_cast<int>(shape_of() % 300);
    try {
      RandomPool pool(seed, devices, isolate);
      for (int e = 0; e < events; ++e) pool.step();
      pool.come_to_rest();
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << " (" << devices << " device(s), isolate " << isolate << ", " << events
             << " events; replay with ORTFLEET_POOL_CORE_SEED=" << seed << "): " << e.what();
    }
  }
}

}  // namespace ortfleet::detail::pool
