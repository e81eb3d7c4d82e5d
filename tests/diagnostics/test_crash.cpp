// Crashes inside ONNX Runtime, injected by a custom op that segfaults or aborts (tests/support):
// contained or explained in every strategy, remembered, located to their node, and kept away from
// the sessions other jobs hold on a shared pool.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/crash_locator.hpp"
#include "base/private_dir.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "process/child_process.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string crash_ops() { return test::bin("libortfleet_test_crash_ops.so"); }

/// A 40-node chain whose node 23 ("crash_here") crashes, in a folder of its own.
std::string crash_model(const std::string& name) {
  const fs::path dir = test::scratch_dir() / "crash" / name;
  fs::create_directories(dir);
  const std::string path = (dir / "chain.onnx").string();
  const auto r = detail::run_child({test::bin("ortfleet_test_crash_model"), path, "40", "23"}, {}, "", 60);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return path;
}

/// `ortfleet ARGS...` in a fresh process with its own cache folder (and `env` added).
detail::ChildResult ortfleet(const std::vector<std::string>& args, const std::string& cache, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {test::bin("ortfleet")};
  argv.insert(argv.end(), args.begin(), args.end());
  env["ORTFLEET_CACHE"] = cache;
  env["ORTFLEET_AUTO_POOL"] = "0";
  return detail::run_child(argv, env, "", 120);
}

std::string cache_for(const std::string& name) { return (test::scratch_dir() / "crash" / name / "cache").string(); }

}  // namespace

TEST(Crash, InProcessItSaysWhichPhaseModelDeviceAndSignalAndHowToLocateIt) {
  const std::string model = crash_model("in-process");
  const auto r = ortfleet({"start", model, "--devices", "cpu", "--strategy", "sequential", "--custom-ops", crash_ops()}, cache_for("in-process"));
  EXPECT_EQ(r.signal, SIGSEGV) << r.describe();
  EXPECT_NE(r.stderr_tail.find("ortfleet: SIGSEGV (segmentation fault) inside ONNX Runtime during the first inference of " + model + " on cpu"),
            std::string::npos)
      << r.stderr_tail;
  EXPECT_NE(r.stderr_tail.find("ortfleet doctor " + model + " --locate-crash --device cpu --custom-ops " + crash_ops()), std::string::npos)
      << r.stderr_tail;
}

TEST(Crash, AnAbortInsideAKernelIsExplainedToo) {
  const std::string model = crash_model("abort");
  const auto r = ortfleet({"start", model, "--devices", "cpu", "--strategy", "threads", "--custom-ops", crash_ops()}, cache_for("abort"),
                          {{"ORTFLEET_TEST_CRASH", "abort"}});
  EXPECT_EQ(r.signal, SIGABRT) << r.describe();
  EXPECT_NE(r.stderr_tail.find("ortfleet: SIGABRT (abort) inside ONNX Runtime during the first inference"), std::string::npos) << r.stderr_tail;
}

TEST(Crash, AWorkersCrashIsInItsDevicesErrorAndTheCallerLivesOn) {
  const std::string model = crash_model("worker");
  const auto r = ortfleet({"start", model, "--devices", "cpu", "--strategy", "processes", "--custom-ops", crash_ops(), "--json"},
                          cache_for("worker"));
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_GT(r.exit_code, 0) << r.describe();  // a failed start, not a crash
  const json report = json::parse(r.stdout_text);
  const std::string error = report.at("devices").at(0).at("error").dump();
  EXPECT_NE(error.find("killed by signal SIGSEGV"), std::string::npos) << error;
  EXPECT_NE(error.find("inside ONNX Runtime during the first inference of " + model), std::string::npos) << error;
  EXPECT_NE(error.find("--locate-crash"), std::string::npos) << error;
}

TEST(Crash, AutoStartsAModelKnownToCrashInAWorkerSoTheCallerSurvives) {
  const std::string model = crash_model("remembered");
  const std::string cache = cache_for("remembered");
  const std::vector<std::string> start = {"start", model, "--devices", "cpu", "--custom-ops", crash_ops(), "--json"};
  const auto first = ortfleet(start, cache);  // one CPU device: auto starts in-process, and the crash ends it
  EXPECT_EQ(first.signal, SIGSEGV) << first.describe();
  const auto second = ortfleet(start, cache);
  EXPECT_EQ(second.signal, 0) << second.describe();
  const json report = json::parse(second.stdout_text);
  EXPECT_NE(report.at("strategy_reason").get<std::string>().find("crashed ONNX Runtime here before"), std::string::npos) << report.dump();
  EXPECT_NE(report.at("devices").at(0).at("error").dump().find("SIGSEGV"), std::string::npos);
  // A changed model file is a new model: started in-process again (and it crashes again).
  { std::ofstream(model, std::ios::app) << ""; }
  fs::last_write_time(model, fs::file_time_type::clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(ortfleet(start, cache).signal, SIGSEGV);
}

TEST(Crash, TheBisectNamesTheCrashingNodeAndWritesAModelThatReproducesIt) {
  const std::string model = crash_model("locate");
  const std::string out = (fs::path(model).parent_path() / "located").string();
  const auto r = ortfleet({"doctor", model, "--locate-crash", "--device", "cpu", "--custom-ops", crash_ops(), "--out", out, "--json", "-q"},
                          cache_for("locate"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json located = json::parse(r.stdout_text);
  EXPECT_TRUE(located.at("crashed").get<bool>());
  EXPECT_EQ(located.at("nodes"), 40);
  EXPECT_EQ(located.at("node").at("name"), "crash_here");
  EXPECT_EQ(located.at("node").at("op_type"), "Crash");
  EXPECT_EQ(located.at("node").at("domain"), "ortfleet.test");
  EXPECT_EQ(located.at("node").at("index"), 23);
  EXPECT_EQ(located.at("node").at("inputs").at(0).at("shape"), "[1, 16]");
  EXPECT_LE(located.at("tries").get<int>(), 12);  // a bisection, not a walk over 40 nodes
  const std::string smallest = located.at("smallest_model");
  EXPECT_EQ(fs::path(smallest).filename(), "crash_node.onnx");
  // The reproducer crashes on its own, with its inputs.
  const auto again = ortfleet({"start", smallest, "--devices", "cpu", "--strategy", "sequential", "--no-model-cache", "--warmup-inputs",
                               located.at("smallest_inputs"), "--custom-ops", crash_ops()},
                              cache_for("locate"));
  EXPECT_EQ(again.signal, SIGSEGV) << again.describe();
  // A model that does not crash has nothing to locate.
  const auto healthy = ortfleet({"doctor", model, "--locate-crash", "--device", "cpu", "--custom-ops", crash_ops(), "--out", out + "-none", "--json", "-q"},
                                cache_for("locate"), {{"ORTFLEET_TEST_CRASH", "none"}});
  EXPECT_EQ(healthy.exit_code, 1) << healthy.describe();
  EXPECT_FALSE(json::parse(healthy.stdout_text).at("crashed").get<bool>());
  EXPECT_FALSE(fs::exists(out + "-none")) << "a locate that found nothing left its folder";
}

// `doctor MODEL` starts the model once in a fresh process: a crash fails the doctor, not the doctor's
// process, and its fix is the crash search; a model that starts is said to, with its time.
TEST(Crash, DoctorWithAModelStartsItAndNamesTheCrashSearchWhenItCrashes) {
  const std::string model = crash_model("doctor");
  const auto crashed = ortfleet({"doctor", model, "--device", "cpu", "--custom-ops", crash_ops(), "--json", "-q"}, cache_for("doctor"));
  EXPECT_EQ(crashed.exit_code, 1) << crashed.describe();
  const json report = json::parse(crashed.stdout_text);
  EXPECT_TRUE(report.at("model").at("crashed").get<bool>()) << report.at("model").dump();
  bool names_the_search = false;
  for (const auto& f : report.at("findings")) {
    if (f.at("check") == "model") names_the_search = f.at("fix").get<std::string>().find("--locate-crash") != std::string::npos;
  }
  EXPECT_TRUE(names_the_search) << report.at("findings").dump();
  const auto healthy = ortfleet({"doctor", model, "--device", "cpu", "--custom-ops", crash_ops(), "--json", "-q"}, cache_for("doctor"),
                                {{"ORTFLEET_TEST_CRASH", "none"}});
  const json fine = json::parse(healthy.stdout_text);
  EXPECT_TRUE(fine.at("model").at("started").get<bool>()) << fine.at("model").dump();
  EXPECT_GT(fine.at("model").at("ready_ms").get<double>(), 0.0);
  EXPECT_EQ(fine.at("model").at("nodes"), 40);
}

// --locate-crash writes config.json, prefix.onnx, workaround.json... into --out: a folder that holds
// a user's files is refused before anything is written, and theirs stay as they were. A new folder,
// or one an earlier locate made, is taken.
TEST(Crash, TheLocatorNeverWritesIntoAFolderOfTheUsersFiles) {
  const fs::path project = test::scratch_dir() / "crash" / "a-project";
  fs::create_directories(project);
  { std::ofstream(project / "config.json") << "{\"my\": \"settings\"}"; }
  CrashLocateOptions o;
  o.model = test::mlp_model();
  o.out_dir = project.string();
  const Error refused = test::error_from([&] { locate_crash(o); });
  EXPECT_NE(std::string(refused.what()).find(project.string() + " holds files ortfleet did not make"), std::string::npos) << refused.what();
  EXPECT_NE(refused.hint().find("new or empty folder"), std::string::npos) << refused.hint();
  EXPECT_EQ(test::read_all(project / "config.json"), "{\"my\": \"settings\"}");
  EXPECT_EQ(std::distance(fs::directory_iterator(project), fs::directory_iterator()), 1);
}

// On a shared pool, a model new to it makes its first session in a worker of its own: its crash
// leaves the sessions another job holds on the shared worker resident and serving, and the pool
// then refuses the crashing model at once, saying why.
TEST(Crash, APoolIsolatesANewModelsCrashFromOtherJobsSessions) {
  const std::string model = crash_model("pool");
  const std::string cache = cache_for("pool");
  ::setenv("ORTFLEET_CACHE", cache.c_str(), 1);  // where the worker's crash is remembered
  PoolOptions po;
  po.devices = {Device::cpu()};
  auto pool = std::make_shared<WorkerPool>(po);
  ASSERT_TRUE(pool->wait(120));
  const int shared_pid = pool->status().front().pid;
  FleetOptions fo;
  fo.devices = {Device::cpu()};
  fo.pool = pool;
  // Another job's model: new to a pool whose worker holds nothing, it starts there (there is nobody's
  // session to protect), and its later starts find it resident.
  int home_pid = 0;
  {
    Fleet first(test::mlp_model(), fo);
    first.start();
    ASSERT_TRUE(first.wait(120));
    home_pid = first.status().front().pid;
    EXPECT_EQ(home_pid, shared_pid) << "a fresh pool's first model starts in its worker, which held nothing";
  }
  Fleet other(test::mlp_model(), fo);
  other.start();
  ASSERT_TRUE(other.wait(120));
  ASSERT_EQ(other.status().front().pid, home_pid);
  EXPECT_TRUE(other.status().front().resident);
  const auto inputs = random_inputs(other.inputs(), 3);
  const auto before = other.run(Device::cpu(), inputs);

  FleetOptions crashing = fo;
  crashing.config.session.custom_op_libraries = {crash_ops()};
  Fleet victim(model, crashing);
  victim.start();
  EXPECT_FALSE(victim.wait(120));
  const std::string error = victim.status().front().error;
  EXPECT_NE(error.find("SIGSEGV"), std::string::npos) << error;
  EXPECT_NE(error.find("inside ONNX Runtime"), std::string::npos) << error;
  EXPECT_NE(victim.status().front().pid, shared_pid) << "the new model started beside the other job's session";

  // The other job's session is still there and serving, in the same worker; the shared one lives on.
  EXPECT_EQ(pool->status().front().pid, shared_pid);
  EXPECT_EQ(other.status().front().pid, home_pid);
  const auto after = other.run(Device::cpu(), inputs);
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(0, std::memcmp(after.front().data, before.front().data, before.front().bytes));

  // The pool refuses the crashing model at once, with the reason.
  Fleet again(model, crashing);
  again.start();
  EXPECT_FALSE(again.wait(120));
  EXPECT_NE(again.status().front().error.find("refuses it until the model file changes"), std::string::npos) << again.status().front().error;
  ::unsetenv("ORTFLEET_CACHE");
}

// The same through `ortfleet serve`: the client's error carries the worker's reason (not "its
// messages above say why": they are in the daemon's log).
TEST(Crash, APoolServersClientGetsTheCrashingWorkersReason) {
  const std::string model = crash_model("pool-server");
  ::setenv("ORTFLEET_CACHE", cache_for("pool-server").c_str(), 1);
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  ServeOptions so;
  so.pool.devices = {Device::cpu()};
  so.socket_path = (dir.path() / "pool.sock").string();
  PoolServer server(so);
  std::thread serving([&] { server.serve(); });
  ASSERT_TRUE(server.pool().wait(120));
  FleetOptions fo;
  fo.devices = {Device::cpu()};
  fo.pool_socket = server.socket_path();
  fo.config.session.custom_op_libraries = {crash_ops()};
  {
    Fleet victim(model, fo);
    victim.start();
    EXPECT_FALSE(victim.wait(120));
    const std::string error = victim.status().front().error;
    EXPECT_NE(error.find("SIGSEGV"), std::string::npos) << error;
    EXPECT_NE(error.find("inside ONNX Runtime during the first inference of " + model), std::string::npos) << error;
  }
  server.stop();
  serving.join();
  ::unsetenv("ORTFLEET_CACHE");
}

}  // namespace ortfleet
