#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "engine/files/npy_file.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "ortfleet/synth/synth.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/pool/pool_test_outputs.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using test::first_output;
using test::in_process_output;
/// A pool of CPU workers whose first start of a model lands in the shared worker, as the residency
/// tests below need (test_crash.cpp tests the isolation of new models).
PoolOptions cpu_pool(int n, size_t max_resident = 0) {
  PoolOptions o;
  for (int i = 0; i < n; ++i) o.devices.push_back(Device::cpu(i));
  o.max_resident_sessions = max_resident;
  o.isolate_new_models = false;
  return o;
}

FleetOptions on_pool(std::shared_ptr<WorkerPool> pool, int threads = 0) {
  FleetOptions o;
  o.devices = pool->devices();
  o.pool = std::move(pool);
  if (threads > 0) o.config.session.intra_op_threads = threads;  // another config: another session
  return o;
}

/// Starts a fleet and waits; every device must become ready.
std::unique_ptr<Fleet> ready_fleet(const std::string& model, const FleetOptions& options) {
  auto fleet = std::make_unique<Fleet>(model, options);
  fleet->start();
  EXPECT_TRUE(fleet->wait(120));
  return fleet;
}

/// Resident sessions per device in a pool status.
std::map<std::string, size_t> resident_counts(const std::string& status_json) {
  std::map<std::string, size_t> counts;
  const json status = json::parse(status_json);
  for (const auto& d : status.at("devices")) counts[d.at("device").get<std::string>()] = d.at("sessions").size();
  return counts;
}
}  // namespace

TEST(WorkerPool, WorkersInitialiseBeforeAnyModelAndFleetsStartOnThem) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(2));
  ASSERT_TRUE(pool->wait(120));
  const auto workers = pool->status();
  ASSERT_EQ(workers.size(), 2u);
  for (const auto& w : workers) {
    EXPECT_EQ(w.state, "ready");
    EXPECT_GT(w.pid, 0);
    EXPECT_NE(w.pid, ::getpid());
  }
  auto fleet = ready_fleet(test::mlp_model(), on_pool(pool));
  const auto inputs = random_inputs(fleet->inputs(), 7);
  const auto want = in_process_output(test::mlp_model(), inputs);
  const auto status = fleet->status();
  for (size_t i = 0; i < status.size(); ++i) {
    EXPECT_EQ(status[i].pid, workers[i].pid) << "the session lives in the pool's worker";
    EXPECT_FALSE(status[i].resident);
    EXPECT_EQ(first_output(fleet->run(status[i].device, inputs)), want);
  }
  // The pool's workers started long before this fleet: its timeline has no process start.
  EXPECT_EQ(fleet->timeline().phase_totals_ms(status[0].device.to_string()).count(phase::process_start), 0u);
}

TEST(WorkerPool, TheSameModelAndSettingsAreResidentAndOthersAreNot) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(2));
  ready_fleet(test::mlp_model(), on_pool(pool))->shutdown();
  auto again = ready_fleet(test::mlp_model(), on_pool(pool));
  for (const auto& s : again->status()) EXPECT_TRUE(s.resident) << s.device.to_string();
  // A copy of the model under another name is the same content: still resident.
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  const auto copy = dir.path() / "copy.onnx";
  fs::copy_file(test::mlp_model(), copy);
  for (const auto& s : ready_fleet(copy.string(), on_pool(pool))->status()) EXPECT_TRUE(s.resident);
  // Other settings make another session.
  for (const auto& s : ready_fleet(test::mlp_model(), on_pool(pool, /*threads=*/1))->status()) EXPECT_FALSE(s.resident);
  EXPECT_EQ(resident_counts(pool->status_json())["cpu"], 2u);
}

TEST(WorkerPool, LeastRecentlyUsedSessionsNobodyHoldsAreEvicted) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(1, /*max_resident=*/1));
  auto held = ready_fleet(test::mlp_model(), on_pool(pool));
  // Over the limit, but the first session is held: both stay.
  auto second = ready_fleet(test::mlp_model(), on_pool(pool, 1));
  EXPECT_EQ(resident_counts(pool->status_json())["cpu"], 2u);
  second->shutdown();
  held->shutdown();
  // Nobody holds either now: a third start evicts down to the limit, oldest first.
  ready_fleet(test::mlp_model(), on_pool(pool, 2))->shutdown();
  EXPECT_EQ(resident_counts(pool->status_json())["cpu"], 1u);
  for (const auto& s : ready_fleet(test::mlp_model(), on_pool(pool))->status()) EXPECT_FALSE(s.resident) << "it was evicted";
  // evict() drops what nobody holds.
  EXPECT_GE(pool->evict(), 1u);
  EXPECT_EQ(resident_counts(pool->status_json())["cpu"], 0u);
}

TEST(WorkerPool, AKilledWorkerFailsItsFleetByDeviceAndIsStartedAgain) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(2));
  auto fleet = ready_fleet(test::mlp_model(), on_pool(pool));
  const int victim = pool->status()[1].pid;
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto inputs = random_inputs(fleet->inputs(), 1);
  try {
    fleet->run(Device::cpu(1), inputs);
    FAIL() << "a run on a killed worker must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu:1"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(fleet->run(Device::cpu(0), inputs)) << "the other device keeps serving";
  // The socket closes while the process exits; it can be reaped a moment later.
  int restarted = 0;
  for (int i = 0; i < 500 && restarted == 0; ++i) {
    restarted = pool->keep_up();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(restarted, 1);
  ASSERT_TRUE(pool->wait(120));
  EXPECT_NE(pool->status()[1].pid, victim);
  EXPECT_EQ(pool->status()[1].restarts, 1);
  auto fresh = ready_fleet(test::mlp_model(), on_pool(pool));
  EXPECT_EQ(fresh->status()[1].pid, pool->status()[1].pid);
}

TEST(WorkerPool, AWorkerMakesSessionsForNewInputShapesLongAfterItsStart) {
  // A session for a new shape is made on the first call of that shape, and records its phase on the
  // timeline its start used: that timeline must outlive the start request.
  auto pool = std::make_shared<WorkerPool>(cpu_pool(1));
  auto fleet = ready_fleet(test::dynamic_mlp_model(), on_pool(pool));
  for (int64_t batch : {2, 3, 1, 3}) {
    const auto inputs = random_inputs(fleet->inputs(), static_cast<uint64_t>(batch), batch);
    EXPECT_EQ(first_output(fleet->run(Device::cpu(0), inputs)), in_process_output(test::dynamic_mlp_model(), inputs)) << batch;
  }
}

TEST(WorkerPool, AWorkerPrimesItsLibrariesWithThrowawaySessionsWhenAsked) {
  detail::LocalStartPlan plan;
  plan.devices = {Device::cpu(0)};
  for (bool prime : {true, false}) {
    detail::WorkerProcess worker(test::bin("ortfleet-worker"), Device::cpu(0));
    const auto events = worker.initialise(plan, 0, prime, 120);
    const auto primed = std::find_if(events.begin(), events.end(), [](const TimelineEvent& e) { return e.name == phase::libraries_prime; });
    ASSERT_EQ(primed != events.end(), prime);
    if (prime) {
      EXPECT_EQ(primed->args.count("error"), 0u) << primed->args.at("error");
    }
    // Nothing of the primer stays: no resident session.
    EXPECT_TRUE(worker.channel().call(detail::message::status, nullptr, 30).body.at("sessions").empty());
  }
}

// A worker killed while it primed (SIGKILL: no handler runs) left its folder of throwaway models in TMPDIR,
// 1.1 MB each: the next worker to prime removes those of dead workers, and nothing else: only a folder
// exactly as the primer makes one (its name, mode 0700, the primer's files in it; issue 58).
TEST(WorkerPool, APrimingWorkerRemovesThePrimerFoldersOfDeadWorkers) {
  const fs::path tmp = test::fresh_dir("primer-tmp");
  const test::ScopedEnv tmpdir("TMPDIR", tmp.string());
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string dead = std::to_string(gone);
  const fs::path of_dead = tmp / ("ortfleet-primer-" + dead + "-Ab12Cd");
  const fs::path of_alive = tmp / ("ortfleet-primer-" + std::to_string(::getpid()) + "-Ef34Gh");
  const fs::path not_primer = tmp / ("ortfleet-primers-" + dead);
  // Named like a primer folder of a dead worker, but not of the primer's form: each stays.
  const std::vector<fs::path> other_forms = {tmp / ("ortfleet-primer-" + dead + "-Ab12Cd-mine"), tmp / ("ortfleet-primer-" + dead + "-Ab1"),
                                             tmp / ("ortfleet-primer-" + dead + "-Ab_2Cd"), tmp / ("ortfleet-primer-0" + dead + "-Ab12Cd")};
  const fs::path open_mode = tmp / ("ortfleet-primer-" + dead + "-Mode00");
  const fs::path other_files = tmp / ("ortfleet-primer-" + dead + "-Notes0");
  const fs::path with_folder = tmp / ("ortfleet-primer-" + dead + "-Deep00");
  std::vector<fs::path> folders = {of_dead, of_alive, not_primer, open_mode, other_files, with_folder};
  folders.insert(folders.end(), other_forms.begin(), other_forms.end());
  for (const auto& d : folders) {
    fs::create_directories(d);
    fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
    std::ofstream(d / "convolutions.onnx") << "x";
  }
  std::ofstream(of_dead / ".attention.onnx.ortfleet-123-456") << "partial";
  fs::permissions(open_mode, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, fs::perm_options::replace);
  std::ofstream(other_files / "my-notes.txt") << "mine";
  fs::create_directories(with_folder / "sub");
  const fs::path link = tmp / ("ortfleet-primer-" + dead + "-Link00");
  fs::create_directory_symlink(not_primer, link);
  detail::LocalStartPlan plan;
  plan.devices = {Device::cpu(0)};
  detail::WorkerProcess worker(test::bin("ortfleet-worker"), Device::cpu(0));
  const auto events = worker.initialise(plan, 0, /*prime=*/true, 120);
  EXPECT_FALSE(fs::exists(of_dead)) << "the folder of a dead worker stayed";
  EXPECT_TRUE(fs::exists(of_alive / "convolutions.onnx")) << "the folder of a live process was removed";
  EXPECT_TRUE(fs::exists(not_primer / "convolutions.onnx"));
  for (const auto& d : other_forms) EXPECT_TRUE(fs::exists(d / "convolutions.onnx")) << d << ": not the primer's form, yet removed";
  EXPECT_TRUE(fs::exists(open_mode / "convolutions.onnx")) << "a folder of another mode was removed";
  EXPECT_TRUE(fs::exists(other_files / "my-notes.txt")) << "a folder holding other files was emptied";
  EXPECT_TRUE(fs::exists(with_folder / "sub")) << "a folder holding a folder was emptied";
  EXPECT_TRUE(fs::is_symlink(link)) << "a link named like a primer folder was removed";
  size_t primer_folders = 0;
  for (const auto& e : fs::directory_iterator(tmp)) primer_folders += e.path().filename().string().rfind("ortfleet-primer-", 0) == 0 ? 1 : 0;
  EXPECT_EQ(primer_folders, 1 + other_forms.size() + 4) << "the worker's own primer folder stayed after priming";
}

// The pool a job leaves runs with the job's config (issue 50): its warm-up inputs, shapes and custom-op
// libraries name the job's model and files (gone with the job, perhaps), not the primer's throwaway
// models. The primer takes none of them, and primes.
TEST(WorkerPool, APrimerTakesNoneOfTheJobsModelSettings) {
  const fs::path dir = test::fresh_dir("primer-settings");
  detail::write_npz((dir / "warmup.npz").string(), random_inputs(inspect_model(test::mlp_model()).input_specs, 1));
  detail::LocalStartPlan plan;
  plan.devices = {Device::cpu(0)};
  plan.config.warmup.inputs_file = (dir / "warmup.npz").string();
  plan.config.session.custom_op_libraries = {(dir / "gone-with-the-job.so").string()};
  detail::WorkerProcess worker(test::bin("ortfleet-worker"), Device::cpu(0));
  const auto events = worker.initialise(plan, 0, /*prime=*/true, 300);
  const auto primed = std::find_if(events.begin(), events.end(), [](const TimelineEvent& e) { return e.name == phase::libraries_prime; });
  ASSERT_NE(primed, events.end());
  EXPECT_EQ(primed->args.count("error"), 0u) << primed->args.at("error");
}

TEST(WorkerPool, MisuseIsReported) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(1));
  FleetOptions other = on_pool(pool);
  other.devices = {Device::cpu(3)};
  Fleet fleet(test::mlp_model(), other);
  fleet.start();
  EXPECT_FALSE(fleet.wait(60));
  EXPECT_NE(fleet.status()[0].error.find("not in this worker pool"), std::string::npos) << fleet.status()[0].error;
  FleetOptions sequential = on_pool(pool);
  sequential.strategy = Strategy::sequential;
  EXPECT_THROW(Fleet(test::mlp_model(), sequential), Error);
  FleetOptions both = on_pool(pool);
  both.pool_socket = "/tmp/nowhere.sock";
  EXPECT_THROW(Fleet(test::mlp_model(), both), Error);
}

namespace {
/// A pool of one CPU worker that isolates models new to it, as `ortfleet serve` runs by default.
PoolOptions isolating_cpu_pool() {
  PoolOptions o;
  o.devices = {Device::cpu(0)};
  return o;
}

/// A small model of its own content (its weights from `seed`): another model to the pool.
std::string distinct_model(const std::string& name, uint64_t seed) {
  const auto path = test::fresh_dir("distinct-models-" + name) / (name + ".onnx");
  synth::WriteOptions w;
  w.seed = seed;
  return synth::write_mlp(path.string(), synth::MlpSpec{}, w).path;
}

/// The pool's workers as status_json lists them: role and pid, with how many sessions each holds.
struct PoolWorker {
  std::string role;
  int pid = 0;
  size_t sessions = 0;
};
std::vector<PoolWorker> pool_workers(const WorkerPool& pool) {
  std::vector<PoolWorker> out;
  const json status = json::parse(pool.status_json());
  for (const auto& d : status.at("devices")) {
    if (d.value("state", "") == "ready") out.push_back({d.value("role", ""), d.value("pid", 0), d.at("sessions").size()});
  }
  return out;
}

int pid_of_role(const WorkerPool& pool, const std::string& role) {
  for (const auto& w : pool_workers(pool)) {
    if (w.role == role) return w.pid;
  }
  return 0;
}
}  // namespace

// A fresh pool keeps one worker per device; a model new to it starts there (nobody's session lives
// there to protect), and only then does a spare come, for the next new model.
TEST(WorkerPoolShape, AFreshPoolHasOneWorkerPerDeviceAndItsFirstModelStartsInIt) {
  auto pool = std::make_shared<WorkerPool>(isolating_cpu_pool());
  ASSERT_TRUE(pool->wait(120));
  ASSERT_EQ(pool_workers(*pool).size(), 1u) << pool->status_json();
  const int shared = pool->status().front().pid;
  auto fleet = ready_fleet(distinct_model("first", 1), on_pool(pool));
  EXPECT_EQ(fleet->status().front().pid, shared);
  pool->keep_up();
  ASSERT_TRUE(pool->wait(120));
  for (int i = 0; i < 600 && pid_of_role(*pool, "spare") == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(pid_of_role(*pool, "spare"), 0) << "the shared worker holds a session now: a spare waits for the next new model";
  // Once nothing is resident any more, one blank worker per device is enough again.
  fleet.reset();  // its channel closes: the worker lets go of the session a moment later
  size_t evicted = 0;
  for (int i = 0; i < 200 && evicted == 0; ++i) {
    evicted = pool->evict();
    if (evicted == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(evicted, 1u);
  EXPECT_EQ(pool_workers(*pool).size(), 1u) << pool->status_json();
}

// Models new to the pool never start beside another job's session, whatever runs at once; when the
// jobs have ended, the device folds back to its shared worker holding every model, and a spare.
TEST(WorkerPoolShape, ANewModelNeverStartsBesideAnotherJobsSessionAndAnIdleDeviceKeepsTwoWorkers) {
  auto pool = std::make_shared<WorkerPool>(isolating_cpu_pool());
  ASSERT_TRUE(pool->wait(120));
  const std::vector<std::string> models = {distinct_model("a", 11), distinct_model("b", 12), distinct_model("c", 13)};
  std::vector<std::unique_ptr<Fleet>> jobs;
  std::set<int> pids;
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::vector<float>> want;
  for (const auto& m : models) {
    jobs.push_back(ready_fleet(m, on_pool(pool)));  // held while the next one starts
    pids.insert(jobs.back()->status().front().pid);
    inputs.push_back(random_inputs(jobs.back()->inputs(), 4));
    want.push_back(in_process_output(m, inputs.back()));
  }
  EXPECT_EQ(pids.size(), models.size()) << "three new models, each held by its job: three workers, none beside another's session";
  jobs.clear();  // the jobs end; their workers let go of their sessions a moment later
  for (int i = 0; i < 200 && pool_workers(*pool).size() > 2; ++i) {
    pool->consolidate();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto workers = pool_workers(*pool);
  ASSERT_LE(workers.size(), 2u) << pool->status_json();
  const int shared = pid_of_role(*pool, "shared");
  for (const auto& w : workers) {
    if (w.role == "shared") EXPECT_EQ(w.sessions, models.size()) << "every model moved into the shared worker";
    else EXPECT_EQ(w.sessions, 0u) << w.role << " holds nothing once folded in";
  }
  // Each model is resident in the shared worker, and gives what it gave.
  for (size_t i = 0; i < models.size(); ++i) {
    auto again = ready_fleet(models[i], on_pool(pool));
    EXPECT_TRUE(again->status().front().resident) << models[i];
    EXPECT_EQ(again->status().front().pid, shared);
    EXPECT_EQ(first_output(again->run(Device::cpu(0), inputs[i])), want[i]);
  }
}

// A model resident in a worker that is up is handed out at once, never behind a shared worker still
// starting (the next job right after the first waited ~1 s for the pool's own worker to finish priming
// on 4 x H200, while its model sat resident in the worker the first job handed over).
TEST(WorkerPoolShape, AResidentModelNeverWaitsForAWorkerStillStarting) {
  auto pool = std::make_shared<WorkerPool>(isolating_cpu_pool());
  ASSERT_TRUE(pool->wait(120));
  const std::string a = distinct_model("resident-a", 21), b = distinct_model("resident-b", 22);
  ready_fleet(a, on_pool(pool)).reset();  // a: in the shared worker, which held nothing
  int b_pid = 0;
  {
    auto on_spare = ready_fleet(b, on_pool(pool));  // b: new, so in the spare, beside nobody's session
    b_pid = on_spare->status().front().pid;
  }
  ASSERT_NE(b_pid, pool->status().front().pid);
  // The shared worker dies; its replacement takes 30 s to come up.
  const test::ScopedEnv slow(detail::env_name(detail::EnvVar::test_worker_init_delay), "cpu=30");
  ASSERT_EQ(::kill(pool->status().front().pid, SIGKILL), 0);
  for (int i = 0; i < 500 && pool->keep_up() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(pool->status().front().state, "starting");
  Fleet again(b, on_pool(pool));
  again.start();
  ASSERT_TRUE(again.wait(15)) << "a resident model waited for a worker still starting";
  EXPECT_TRUE(again.status().front().resident);
  EXPECT_EQ(again.status().front().pid, b_pid);
}

// A worker that does not answer (stopped) does not hold up the pool's status: it is shown as it last
// answered, and said to be busy.
TEST(WorkerPoolShape, StatusAnswersWhileAWorkerIsStopped) {
  auto pool = std::make_shared<WorkerPool>(isolating_cpu_pool());
  ASSERT_TRUE(pool->wait(120));
  auto fleet = ready_fleet(test::mlp_model(), on_pool(pool));
  ASSERT_EQ(json::parse(pool->status_json()).at("devices").at(0).at("sessions").size(), 1u);
  const int pid = pool->status().front().pid;
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  // kill() returns before every thread of the worker has stopped: wait until the kernel says it has.
  const auto state_of = [pid] {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0) return line;
    }
    return std::string();
  };
  for (int i = 0; i < 500 && state_of().find("stopped") == std::string::npos; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_NE(state_of().find("stopped"), std::string::npos) << state_of();
  const auto started = std::chrono::steady_clock::now();
  const json status = json::parse(pool->status_json());
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::kill(pid, SIGCONT);
  EXPECT_LT(took_s, 5) << "the status waited for a stopped worker";  // a hang guard, not a speed test
  const json& shared = status.at("devices").at(0);
  EXPECT_EQ(shared.value("answered", true), false) << shared.dump();
  EXPECT_EQ(shared.at("sessions").size(), 1u) << "its sessions as it said last";
  EXPECT_GT(status.at("total").at("host_pss_bytes").get<uint64_t>(), 0u);
}

// Before parking, a worker hands back what no session needs; its sessions still give what they gave.
TEST(WorkerPoolShape, ATrimmedWorkerStillServesItsSessions) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(1));
  auto fleet = ready_fleet(test::mlp_model(), on_pool(pool));
  const auto inputs = random_inputs(fleet->inputs(), 6);
  const auto want = in_process_output(test::mlp_model(), inputs);
  fleet.reset();  // nobody holds it: its arena may shrink
  auto worker = pool->worker_for(Device::cpu(0), test::mlp_model(), 60);
  const json done = worker->channel().call(detail::message::trim, nullptr, 60).body;
  pool->start_succeeded(worker, test::mlp_model());
  EXPECT_EQ(done.value("arenas_shrunk", -1), 1) << done.dump();
  EXPECT_TRUE(done.contains("heap_trimmed")) << done.dump();
  auto again = ready_fleet(test::mlp_model(), on_pool(pool));
  EXPECT_TRUE(again->status().front().resident);
  EXPECT_EQ(first_output(again->run(Device::cpu(0), inputs)), want);
}

// A model file rewritten in place (python.md's quick-start writes its model on every run) left its old
// session resident beside the new one until the pool exited (issue 59): the start of the new content
// drops the old one, nobody holding it.
TEST(WorkerPoolShape, AModelRewrittenInPlaceDropsItsOldSession) {
  auto pool = std::make_shared<WorkerPool>(isolating_cpu_pool());
  ASSERT_TRUE(pool->wait(120));
  const std::string model = distinct_model("rewritten", 31);
  ready_fleet(model, on_pool(pool)).reset();
  ASSERT_TRUE(ready_fleet(model, on_pool(pool))->status().front().resident);
  synth::WriteOptions w;
  w.seed = 32;
  synth::write_mlp(model, synth::MlpSpec{}, w);  // new weights under the same name
  auto renewed = ready_fleet(model, on_pool(pool));
  EXPECT_FALSE(renewed->status().front().resident) << "the old content's session was handed out";
  const auto inputs = random_inputs(renewed->inputs(), 5);
  EXPECT_EQ(first_output(renewed->run(Device::cpu(0), inputs)), in_process_output(model, inputs));
  size_t sessions = 0;
  for (const auto& worker : pool_workers(*pool)) sessions += worker.sessions;
  EXPECT_EQ(sessions, 1u) << "the old content's session stayed beside the new one: " << pool->status_json();
}

// `pool status` rows that look the same are one model under other settings: each says what sets it
// apart; a session's own memory is given where the worker holds it alone, else none (issue 59).
TEST(WorkerPoolShape, StatusTellsSessionsApartAndGivesASessionItsOwnMemoryWhereItCanBeKnown) {
  auto pool = std::make_shared<WorkerPool>(cpu_pool(1));
  ASSERT_TRUE(pool->wait(120));
  auto one = ready_fleet(test::mlp_model(), on_pool(pool));
  json status = json::parse(pool->status_json());
  const json& alone = status.at("devices").at(0).at("sessions").at(0);
  ASSERT_TRUE(alone.at("own_memory").is_object()) << alone.dump();
  EXPECT_GT(alone.at("own_memory").at("host_bytes").get<uint64_t>(), 0u) << alone.dump();
  EXPECT_FALSE(alone.contains("differs_by")) << "a session alone needs nothing to tell it apart";
  EXPECT_FALSE(alone.contains("plan")) << "the plans are not shown";
  auto other = ready_fleet(test::mlp_model(), on_pool(pool, /*threads=*/1));
  status = json::parse(pool->status_json());
  const json& sessions = status.at("devices").at(0).at("sessions");
  ASSERT_EQ(sessions.size(), 2u);
  std::set<std::string> threads;
  for (const auto& s : sessions) {
    EXPECT_TRUE(s.at("own_memory").is_null()) << "two sessions in one worker: neither's own memory can be told";
    ASSERT_TRUE(s.at("differs_by").contains("config.session.intra_op_threads")) << s.dump();
    EXPECT_EQ(s.at("differs_by").size(), 1u) << s.dump();
    threads.insert(s.at("differs_by").at("config.session.intra_op_threads").dump());
  }
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_TRUE(status.at("devices").at(0).at("sessions_memory").is_object());
}

// A worker whose channel closed while its process lives (stuck in its exit, held by a debugger) held its
// caller for as long as it lived, under the process's lock: `pool status` and `pool stop` hung on it
// (issue 58). Its caller hears within seconds that it closed its connection and still runs.
TEST(WorkerProcessEnd, AWorkerWhoseChannelClosedWhileItLivesNeverHoldsItsCallerForEver) {
  const fs::path dir = test::fresh_dir("channel-closed-alive");
  const fs::path fake = dir / "fake-worker";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\nexec 3>&- 4>&-\nexec sleep 60\n";  // closes its channel, lives on
  }
  fs::permissions(fake, fs::perms::owner_all);
  const int code = test::exit_code_within(40, [&] {
    detail::WorkerProcess worker(fake.string(), Device::cpu(0), /*narrow=*/false);
    const int pid = worker.pid();
    std::string said;
    std::thread asking([&] { said = test::error_of([&] { worker.channel().call(detail::message::status, nullptr, 30); }); });
    asking.join();
    const bool named = said.find("closed its connection (its process, pid " + std::to_string(pid) + ", still runs") != std::string::npos;
    worker.terminate(0.5);
    const bool ended = !worker.exited().empty();
    return named && ended ? 0 : (std::fprintf(stderr, "said: %s\n", said.c_str()), 1);
  });
  EXPECT_EQ(code, 0) << (code < 0 ? "the caller waited on a worker that closed its channel and lived on" : "see above");
}

// A pool and a fleet hold no more CPU workers than this process has cores (issue 50: `cpu*99` on 2 cores
// left 298 processes): refused before a worker is spawned, naming the limit.
TEST(WorkerPool, NoMoreCpuWorkersThanCores) {
  const int cores = detail::usable_cpus();
  PoolOptions too_many = cpu_pool(cores + 1);
  const std::string pool = test::error_of([&] { WorkerPool refused(too_many); });
  EXPECT_NE(pool.find(std::to_string(cores + 1) + " CPU sessions asked for"), std::string::npos) << pool;
  FleetOptions fleet;
  fleet.devices = too_many.devices;
  fleet.strategy = Strategy::processes;
  const std::string started = test::error_of([&] { Fleet refused(test::mlp_model(), fleet); });
  EXPECT_NE(started.find("at most " + std::to_string(cores) + ", one per core"), std::string::npos) << started;
}

TEST(WorkerNarrowing, AGpuWorkerSeesOnlyItsOwnGpu) {
  const test::ScopedEnv visible("CUDA_VISIBLE_DEVICES", std::nullopt);
  detail::WorkerProcess worker(test::bin("ortfleet-worker"), Device::cuda(1), /*narrow=*/true);
  EXPECT_EQ(worker.visible_devices(), "1");
  // The worker says what it sees.
  EXPECT_EQ(worker.channel().call(detail::message::status, nullptr, 30).body.at("cuda_visible_devices"), "1");
  detail::WorkerProcess wide(test::bin("ortfleet-worker"), Device::cuda(1), /*narrow=*/false);
  EXPECT_EQ(wide.visible_devices(), "");
  EXPECT_EQ(wide.channel().call(detail::message::status, nullptr, 30).body.at("cuda_visible_devices"), "");
}

class PoolServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServeOptions o;
    o.pool = cpu_pool(2);
    o.socket_path = (dir_.path() / "pool.sock").string();
    server_ = std::make_unique<PoolServer>(o);
    serving_ = std::thread([this] { server_->serve(); });
    ASSERT_TRUE(server_->pool().wait(120));
  }
  void TearDown() override {
    server_->stop();
    serving_.join();
    server_.reset();
  }
  FleetOptions client() const {
    FleetOptions o;
    o.devices = {Device::cpu(0), Device::cpu(1)};
    o.pool_socket = server_->socket_path();
    return o;
  }

  detail::PrivateDir dir_ = detail::PrivateDir::temporary("ortfleet-test");
  std::unique_ptr<PoolServer> server_;
  std::thread serving_;
};

TEST_F(PoolServerTest, ClientsGetResidentSessionsAndRunStraightOnTheWorkers) {
  struct stat st {};
  ASSERT_EQ(::stat(server_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only its user may connect";
  auto first = ready_fleet(test::mlp_model(), client());
  const auto inputs = random_inputs(first->inputs(), 3);
  const auto want = in_process_output(test::mlp_model(), inputs);
  for (const auto& s : first->status()) {
    EXPECT_FALSE(s.resident);
    EXPECT_EQ(first_output(first->run(s.device, inputs)), want);
  }
  // Two more clients at once, while the first still holds its sessions: both find them resident.
  auto second = std::async(std::launch::async, [&] { return ready_fleet(test::mlp_model(), client()); });
  auto third = std::async(std::launch::async, [&] { return ready_fleet(test::mlp_model(), client()); });
  for (auto* f : {&second, &third}) {
    auto fleet = f->get();
    for (const auto& s : fleet->status()) EXPECT_TRUE(s.resident) << s.device.to_string();
    EXPECT_EQ(first_output(fleet->run(Device::cpu(1), inputs)), want);
  }
  const auto status = json::parse(pool_status(server_->socket_path()));
  EXPECT_EQ(status.at("devices").size(), 2u);
  EXPECT_EQ(status.at("devices")[0].at("sessions").size(), 1u);
  EXPECT_EQ(pool_evict(server_->socket_path()), 0u) << "the first client still holds them";
  first->shutdown();
  // The holders let go asynchronously when a channel closes: evict until the worker has seen it.
  size_t evicted = 0;
  for (int i = 0; i < 100 && evicted < 2; ++i) {
    evicted += pool_evict(server_->socket_path());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(evicted, 2u);
}

TEST_F(PoolServerTest, AWorkerKilledUnderAClientFailsThatDeviceAndIsReplaced) {
  auto fleet = ready_fleet(test::mlp_model(), client());
  const int victim = fleet->status()[0].pid;
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto inputs = random_inputs(fleet->inputs(), 1);
  EXPECT_THROW(fleet->run(Device::cpu(0), inputs), Error);
  EXPECT_NO_THROW(fleet->run(Device::cpu(1), inputs));
  // The server replaces it within a second or so; a new client gets the new worker.
  for (int i = 0; i < 200 && server_->pool().status()[0].pid == victim; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(server_->pool().wait(120));
  auto next = ready_fleet(test::mlp_model(), client());
  EXPECT_NE(next->status()[0].pid, victim);
}

TEST_F(PoolServerTest, ASecondServerOnTheSameSocketIsRefused) {
  ServeOptions o;
  o.pool = cpu_pool(1);
  o.socket_path = server_->socket_path();
  EXPECT_THROW(PoolServer{o}, Error);
}

TEST(PoolServer, ClientsWithoutAServerOrOfAnotherUserGetOneClearError) {
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  try {
    pool_status((dir.path() / "none.sock").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no warm pool runs on"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("ortfleet serve"), std::string::npos);
  }
  EXPECT_NO_THROW(check_pool_client(1000, 1000, "/run/user/1000/ortfleet/pool.sock"));
  try {
    check_pool_client(1001, 1000, "/run/user/1000/ortfleet/pool.sock");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("uid 1001"), std::string::npos) << e.what();
  }
}

// A --socket path that holds a user's file is refused, by the server and by clients, and the file is
// left as it was: the server used to replace it with its socket and remove that at shutdown.
TEST(PoolServer, AFileThatIsNotASocketIsRefusedAndLeftAsItWas) {
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  const fs::path notes = dir.path() / "notes.txt";
  { std::ofstream(notes) << "my notes, not a socket\n"; }
  fs::create_symlink(notes, dir.path() / "link.sock");
  fs::create_directory(dir.path() / "folder.sock");
  for (const fs::path& path : {notes, dir.path() / "link.sock", dir.path() / "folder.sock"}) {
    ServeOptions o;
    o.pool = cpu_pool(1);
    o.socket_path = path.string();
    try {
      PoolServer server(o);
      FAIL() << "the server took " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string() + " exists and is not a socket"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("`socket_path`"), std::string::npos) << e.hint();  // a front end says its word: --socket, socket=
    }
  }
  for (const auto& ask : {std::function<void()>([&] { pool_status(notes.string()); }), std::function<void()>([&] { pool_evict(notes.string()); })}) {
    try {
      ask();
      FAIL() << "a client called the file a socket";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exists and is not a socket (it is a regular file of 23 bytes)"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("stale"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(test::read_all(notes), "my notes, not a socket\n");
  EXPECT_TRUE(fs::is_symlink(dir.path() / "link.sock"));
  EXPECT_TRUE(fs::is_directory(dir.path() / "folder.sock"));
}

// docs/guarantees.md, serve's socket: a named pipe at the path is refused without being opened, and a
// socket is made only in a folder no other user can change (one others may write, or, as root, one of
// another user): refused, and nothing is made there.
TEST(PoolServer, APipeOrAFolderAnotherUserControlsIsRefusedAndLeftAsItWas) {
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  const fs::path pipe = dir.path() / "pipe.sock";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  const fs::path open = dir.path() / "open";
  fs::create_directory(open);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  std::vector<std::pair<fs::path, std::string>> cases = {
      {pipe, pipe.string() + " exists and is not a socket (it is a named pipe)"},
      {open / "pool.sock", "the folder " + open.string() + " can be written by other users (mode 0777)"},
      {open / "made" / "pool.sock", "the folder " + open.string() + " above " + (open / "made").string() + " can be written by other users"},
  };
  if (::geteuid() == 0) {
    const fs::path theirs = dir.path() / "theirs";
    fs::create_directory(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    cases.push_back({theirs / "pool.sock", "the folder " + theirs.string() + " belongs to"});
  }
  for (const auto& [path, said] : cases) {
    SCOPED_TRACE(path.string());
    ServeOptions o;
    o.pool = cpu_pool(1);
    o.socket_path = path.string();
    const int code = test::exit_code_within(60, [&] {
      const std::string e = test::error_of([&] { PoolServer server(o); });
      return e.find(said) != std::string::npos ? 0 : 1;
    });
    EXPECT_EQ(code, 0) << (code < 0 ? "the server waited on the path" : "not refused with: " + said);
  }
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_FALSE(fs::exists(open / "pool.sock"));
  EXPECT_FALSE(fs::exists(open / "made"));
}

// At shutdown the server removes its own socket only: a file put in its place meanwhile stays.
TEST(PoolServer, ShutdownRemovesItsOwnSocketOnly) {
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  const fs::path socket = dir.path() / "pool.sock";
  ServeOptions o;
  o.pool = cpu_pool(1);
  o.socket_path = socket.string();
  {
    PoolServer server(o);
    EXPECT_TRUE(fs::is_socket(socket));
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(socket))) << "the server's own socket is removed";
  {
    PoolServer server(o);
    fs::remove(socket);
    { std::ofstream(socket) << "written while the server ran\n"; }
  }
  EXPECT_EQ(test::read_all(socket), "written while the server ran\n");
}

TEST(PoolServer, TheDefaultSocketIsInTheUsersRuntimeFolder) {
  const test::ScopedEnv job("SLURM_JOB_ID", std::nullopt);
  {
    const test::ScopedEnv runtime("XDG_RUNTIME_DIR", test::scratch_dir().string());
    EXPECT_EQ(default_pool_socket(), (test::scratch_dir() / "ortfleet" / "pool.sock").string());
  }
  const std::string fallback = "/tmp/ortfleet-" + std::to_string(::getuid()) + "/pool.sock";
  {
    // One that names no folder (a Slurm job inherits the login node's) is not made: /tmp's is used.
    const test::ScopedEnv runtime("XDG_RUNTIME_DIR", "/run/user/no-such-folder");
    EXPECT_EQ(default_pool_socket(), fallback);
  }
  const test::ScopedEnv runtime("XDG_RUNTIME_DIR", std::nullopt);
  EXPECT_EQ(default_pool_socket(), fallback);
}

// auto starts on a pool server that answers on the default socket and serves every device asked for;
// it says so, and the sessions live in the pool's workers. Opting out, or a device the pool lacks,
// starts cold as before.
TEST(PoolServer, AutoStartsOnALivePoolServerOnTheDefaultSocket) {
  const std::string model = test::mlp_model();  // first: the test set-up sets ORTFLEET_AUTO_POOL=0 when it runs
  const detail::PrivateDir runtime = detail::PrivateDir::temporary("ortfleet-test-runtime");
  const test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path().string());
  const test::ScopedEnv allowed("ORTFLEET_AUTO_POOL", std::nullopt);
  ServeOptions so;
  so.pool = cpu_pool(2);
  PoolServer server(so);
  ASSERT_EQ(server.socket_path(), default_pool_socket());
  std::thread serving([&] { server.serve(); });
  ASSERT_TRUE(server.pool().wait(120));
  FleetOptions o;
  o.devices = {Device::cpu(0), Device::cpu(1)};
  // No cache entry for the pool to make in the background: nothing spawns (and reads the environment)
  // while the test changes ORTFLEET_AUTO_POOL below (ThreadSanitizer).
  o.config.session.optimized_model_cache = false;
  {
    auto fleet = ready_fleet(model, o);
    EXPECT_EQ(fleet->strategy_reason().rfind("auto chose the warm worker pool on " + default_pool_socket(), 0), 0u)
        << fleet->strategy_reason();
    const auto workers = server.pool().status();
    const auto status = fleet->status();
    for (size_t i = 0; i < status.size(); ++i) EXPECT_EQ(status[i].pid, workers[i].pid) << "the session lives in the pool's worker";
  }
  FleetOptions opted_out = o;
  opted_out.auto_pool = false;
  EXPECT_EQ(Fleet(model, opted_out).strategy_reason().find("pool"), std::string::npos);
  {
    // No worker starting: nothing spawns (and reads the environment) while it is changed (ThreadSanitizer).
    ASSERT_TRUE(server.pool().wait(120));
    const test::ScopedEnv off("ORTFLEET_AUTO_POOL", "0");
    EXPECT_EQ(Fleet(model, o).strategy_reason().find("pool"), std::string::npos);
  }
  FleetOptions other = o;
  other.devices = {Device::cpu(0), Device::cpu(2)};  // one device the pool lacks (no more CPU sessions than cores)
  const std::string reason = Fleet(model, other).strategy_reason();
  EXPECT_EQ(reason.rfind("auto chose fleet: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("does not serve cpu:2"), std::string::npos) << reason;
  FleetOptions sequential = o;
  sequential.strategy = Strategy::sequential;  // an explicit strategy is never moved onto the pool
  EXPECT_EQ(Fleet(model, sequential).strategy_reason(), "as asked");
  server.stop();
  serving.join();
}

}  // namespace ortfleet
