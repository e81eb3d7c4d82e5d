#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/environment.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/files/npy_file.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
detail::LocalStartPlan cpu_plan(const fs::path& cache) {
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu()};
  plan.cache_dir = cache.string();
  plan.config.session.optimized_model_cache = true;
  return plan;
}

std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) names.push_back(e.path().filename().string());
  return names;
}

bool process_gone(int pid) { return pid <= 0 || ::kill(pid, 0) != 0; }
}  // namespace

// The entry a start missed is made off its path: written, checked against the model, priced, by a
// background worker that then goes away.
TEST(BackgroundFill, MakesAVerifiedPricedEntry) {
  const fs::path cache = test::scratch_dir() / "fill-made";
  fs::remove_all(cache);
  detail::BackgroundFill fill(cpu_plan(cache), test::bin("ortfleet-worker"), /*narrow_workers=*/true);
  const auto outcome = fill.wait(120);
  ASSERT_TRUE(outcome) << "the fill did not finish in 120 s";
  EXPECT_NE(outcome->find("made the model cache entry"), std::string::npos) << *outcome;
  const auto entries = ModelCache(cache.string()).entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries.front().load_note.empty()) << "the entry was not priced";
  EXPECT_EQ(entries.front().model, fs::absolute(test::mlp_model()).string());
  // A start now finds it (or, priced as no faster, says so): never a miss.
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.cache_dir = cache.string();
  spec.config.session.optimized_model_cache = true;
  const Session later(spec);
  EXPECT_TRUE(later.model_cache_outcome() == "hit" || later.model_cache_outcome() == "no-gain") << later.model_cache_outcome();
}

// A job that ends first takes its fill with it: no worker stays, no file of an unfinished entry.
TEST(BackgroundFill, OneLetGoOfEarlyLeavesNoProcessAndNoFile) {
  const fs::path cache = test::scratch_dir() / "fill-abandoned";
  fs::remove_all(cache);
  const test::ScopedEnv slow(detail::env_name(detail::EnvVar::test_worker_start_delay), "cpu=60");  // the worker is busy when let go of
  int pid = 0;
  {
    detail::BackgroundFill fill(cpu_plan(cache), test::bin("ortfleet-worker"), true);
    pid = fill.worker_pid();
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(fill.finished());
  }
  EXPECT_TRUE(process_gone(pid)) << "the fill's worker " << pid << " outlived its owner";
  for (const auto& name : names_in(cache / "models")) {
    EXPECT_TRUE(name.ends_with(".lock") || name.ends_with(".digests.json")) << name << " was left behind";
  }
}

// A fill stopped while it prices its entry (its pool stops, its job ends: SIGTERM) leaves no folder in
// TMPDIR: bench's pools left an ortfleet-price-XXXXXX folder per round (issue 58's audit).
TEST(BackgroundFill, OneStoppedWhilePricingLeavesNoFolderInTmpdir) {
  const fs::path dir = test::fresh_dir("fill-stopped-pricing");
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const test::ScopedEnv own_tmp("TMPDIR", tmp.string());  // the worker's TMPDIR, where it prices
  bool priced_when_stopped = false;
  int pid = 0;
  {
    detail::BackgroundFill fill(cpu_plan(dir / "cache"), test::bin("ortfleet-worker"), true);
    pid = fill.worker_pid();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fill.finished() && std::chrono::steady_clock::now() < deadline) {
      if (!names_in(tmp).empty()) {  // its price folder: let go of it now
        priced_when_stopped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  ASSERT_TRUE(priced_when_stopped) << "the fill finished before its price folder was seen";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!process_gone(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(process_gone(pid));
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{}) << "left in TMPDIR";
}

// A fill outlives the job that asked for it: the warm pool a job leaves makes the entry after the job
// ended (issue 50: a Python job's warm-up arrays, a temporary .npz removed with its fleet, failed the
// pool's fill). It works from copies of the plan's files, so the job's may go: its warm-up inputs, its
// custom-op libraries; its profile folder is neither written nor made again.
TEST(BackgroundFill, WorksOnWhenTheJobsFilesAreGone) {
  const fs::path dir = test::fresh_dir("fill-owns-its-inputs");
  const fs::path job = dir / "job";
  fs::create_directories(job / "profiles");
  detail::LocalStartPlan plan = cpu_plan(dir / "cache");
  detail::write_npz((job / "warmup.npz").string(), random_inputs(inspect_model(test::mlp_model()).input_specs, 4));
  plan.config.warmup.inputs_file = (job / "warmup.npz").string();
  fs::copy_file(test::bin("libortfleet_test_crash_ops.so"), job / "libops.so");
  plan.config.session.custom_op_libraries = {(job / "libops.so").string()};
  plan.profile_dir = (job / "profiles").string();
  const test::ScopedEnv later(detail::env_name(detail::EnvVar::test_worker_start_delay), "cpu=1");  // the worker reads the plan once the job's files are gone
  detail::BackgroundFill fill(plan, test::bin("ortfleet-worker"), /*narrow_workers=*/true);
  fs::remove_all(job);  // the job ends, and its temporary files go with it
  const auto outcome = fill.wait(120);
  ASSERT_TRUE(outcome) << "the fill did not finish in 120 s";
  EXPECT_NE(outcome->find("made the model cache entry"), std::string::npos) << *outcome;
  EXPECT_EQ(ModelCache((dir / "cache").string()).entries().size(), 1u);
  EXPECT_FALSE(fs::exists(job)) << "the fill made the job's folder again";
}

// What a user sees: the cold start loads the model as it is, says that the entry is made after ready,
// and the next start loads the entry.
TEST(Fleet, AColdStartMakesTheEntryItMissedAfterReady) {
  const fs::path cache = test::scratch_dir() / "fleet-fill";
  fs::remove_all(cache);
  FleetOptions o;
  o.devices = {Device::cpu()};
  o.cache_dir = cache.string();
  o.auto_pool = false;  // no warm pool: this fleet makes the entry itself
  {
    Fleet first(test::mlp_model(), o);
    first.start();
    ASSERT_TRUE(first.wait());
    EXPECT_EQ(first.status().front().model_cache, "miss");
    EXPECT_EQ(first.left_behind().size(), 1u) << "complete once wait() has returned";
    const auto done = first.wait_for_cache_fill(120);
    ASSERT_TRUE(done);
    EXPECT_NE(done->find("made the model cache entry"), std::string::npos) << *done;
    ASSERT_EQ(first.left_behind().size(), 1u);
    EXPECT_NE(first.left_behind().front().find("in the background"), std::string::npos) << first.left_behind().front();
  }
  Fleet second(test::mlp_model(), o);
  second.start();
  ASSERT_TRUE(second.wait());
  const std::string outcome = second.status().front().model_cache;
  EXPECT_TRUE(outcome == "hit" || outcome == "no-gain") << outcome;
  EXPECT_TRUE(second.left_behind().empty() || second.wait_for_cache_fill(0) == std::nullopt);
}

}  // namespace ortfleet
