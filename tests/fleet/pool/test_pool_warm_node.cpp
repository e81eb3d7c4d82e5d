// A warm node (issue 60), on the CPU: a node daemon's models resident before any job asks (named, or
// served before it last stopped), a restore ahead of a job as its Fleet is made, no spare while parked,
// large sessions dropped before parking and made again from their cache entry. CPU workers "park"
// stopped by SIGSTOP here (ORTFLEET_TEST_PARK_CPU): nothing runs on them until they are restored, as a
// GPU worker parked by the driver's checkpoint.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/served_models.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A node daemon on a private socket, with its own state folder, served on a thread of this test.
class Daemon {
 public:
  Daemon(ServeOptions o, const fs::path& state) {
    o.socket_path = (dir_.path() / "pool.sock").string();
    o.preload.state_dir = state.string();
    server_ = std::make_unique<PoolServer>(o);
    serving_ = std::thread([this] { server_->serve(); });
  }
  ~Daemon() {
    server_->stop();
    serving_.join();
  }
  const std::string& socket() const { return server_->socket_path(); }
  json status() const { return json::parse(pool_status(server_->socket_path())); }
  /// Waits (asking its status, as `watch ortfleet pool status` would) until `done` holds, at most
  /// `timeout_s`; the last status.
  json await(const std::function<bool(const json&)>& done, double timeout_s = 120) const {
    const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
    json last;
    while (monotonic_ns() < deadline) {
      last = status();
      if (done(last)) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the daemon did not come to what the test waits for within " << timeout_s << " s: " << last.dump();
    return last;
  }
  FleetOptions client() const {
    FleetOptions o;
    o.devices = {Device::cpu(0)};
    o.pool_socket = socket();
    return o;
  }

 private:
  detail::PrivateDir dir_ = detail::PrivateDir::temporary("ortfleet-test-node");
  std::unique_ptr<PoolServer> server_;
  std::thread serving_;
};

ServeOptions node(bool isolate = false, double park_after_s = 0) {
  ServeOptions o;
  o.pool.devices = {Device::cpu(0)};
  o.pool.isolate_new_models = isolate;
  o.park_after_s = park_after_s;
  o.preload.remember = true;  // as `ortfleet serve` does by default
  return o;
}

bool preloaded(const json& s) { return s.at("preload").value("state", "") == "done"; }

/// The sessions of every worker, in one list.
json sessions_of(const json& status) {
  json out = json::array();
  for (const auto& d : status.at("devices")) {
    for (const auto& s : d.value("sessions", json::array())) out.push_back(s);
  }
  return out;
}

bool all_parked(const json& s) {
  const auto& d = s.at("devices");
  return !d.empty() && std::all_of(d.begin(), d.end(), [](const json& w) { return w.value("parked", false); });
}

bool none_parked(const json& s) {
  const auto& d = s.at("devices");
  return !d.empty() && std::none_of(d.begin(), d.end(), [](const json& w) { return w.value("parked", false); });
}

/// A Fleet's first start on the daemon: whether its session was resident there.
bool started_resident(const std::string& model, const Daemon& daemon) {
  Fleet fleet(model, daemon.client());
  fleet.start();
  EXPECT_TRUE(fleet.wait(120));
  return fleet.status()[0].resident;
}

}  // namespace

TEST(WarmNode, ANamedModelIsResidentBeforeAnyJobAndTheFirstJobFindsIt) {
  const fs::path dir = test::fresh_dir("warm-node-named");
  ServeOptions o = node();
  o.preload.models = {fs::absolute(test::mlp_model()).string()};
  Daemon daemon(o, dir / "state");
  const json status = daemon.await(preloaded);
  const json sessions = sessions_of(status);
  ASSERT_EQ(sessions.size(), 1u) << status.dump();
  EXPECT_TRUE(sessions[0].value("preloaded", false));
  EXPECT_EQ(status.at("preload").value("made", 0), 1);
  EXPECT_TRUE(started_resident(test::mlp_model(), daemon)) << "the first job after the daemon started made its session anew";
}

TEST(WarmNode, TheModelsServedBeforeARestartAreResidentAgainUnlessTheirFileChanged) {
  const fs::path dir = test::fresh_dir("warm-node-restart");
  const std::string model = (dir / "m.onnx").string();
  fs::copy_file(test::mlp_model(), model);
  {
    Daemon first(node(), dir / "state");
    first.await(preloaded);
    EXPECT_FALSE(started_resident(model, first)) << "nothing was named, and nothing served before";
  }  // stopped: what it served is remembered
  ASSERT_TRUE(fs::exists(dir / "state" / detail::ServedModels::kFileName));
  {
    Daemon again(node(), dir / "state");
    const json status = again.await(preloaded);
    const json sessions = sessions_of(status);
    ASSERT_EQ(sessions.size(), 1u) << status.dump();
    EXPECT_TRUE(sessions[0].value("preloaded", false));
    EXPECT_TRUE(started_resident(model, again)) << "the first job after the restart made its session anew";
  }
  test::copy_with_other_weights(test::mlp_model(), model);  // a new checkpoint under the same name
  {
    Daemon changed(node(), dir / "state");
    const json status = changed.await(preloaded);
    EXPECT_TRUE(sessions_of(status).empty()) << status.dump();
    const std::string left_out = status.at("preload").at("left_out").dump();
    EXPECT_NE(left_out.find("its file changed since it was served"), std::string::npos) << left_out;
  }
  {
    ServeOptions forgetful = node();
    forgetful.preload.remember = false;
    Daemon fresh(forgetful, dir / "state");
    EXPECT_TRUE(sessions_of(fresh.await(preloaded)).empty()) << "--no-remember made what was served resident";
  }
}

TEST(WarmNode, WhatTheBudgetCannotHoldIsLeftOutAndSaysSo) {
  const fs::path dir = test::fresh_dir("warm-node-budget");
  ServeOptions o = node();
  o.preload.models = {fs::absolute(test::mlp_model()).string()};
  o.preload.budget_bytes = 1000;  // less than the model
  Daemon daemon(o, dir / "state");
  const json status = daemon.await(preloaded);
  EXPECT_TRUE(sessions_of(status).empty()) << status.dump();
  EXPECT_NE(status.at("preload").at("left_out").dump().find("over the preload budget"), std::string::npos) << status.dump();
}

// A session made from the model (its start missed the cache: a job's own worker handed over, or one
// made at start on an empty cache) holds more than one made from the entry on a GPU (2.7 against 1.4 GiB
// for the 1.28 GB transformer): once the pool is idle and the entry exists, it is made again from it. Not
// on the CPU, where it holds less (its weights stay mapped from the model's file): CPU workers count as a
// GPU's here (ORTFLEET_TEST_PARK_CPU), and without that they are left as they are.
TEST(WarmNode, ASessionMadeFromTheModelIsMadeAgainFromItsEntryOnceIdle) {
  const test::ScopedEnv as_a_gpu("ORTFLEET_TEST_PARK_CPU", "1");
  const fs::path dir = test::fresh_dir("warm-node-remade");
  const test::ScopedEnv cache("ORTFLEET_CACHE", (dir / "cache").string());  // empty: no entry of the model yet
  const std::string model = (dir / "m.onnx").string();
  fs::copy_file(test::mlp_model(), model);
  ServeOptions o = node();
  o.fold_after_s = 0.3;  // idle work soon
  o.preload.models = {model};
  o.pool.config.session.model_cache_fill = ModelCacheFill::inline_start;  // the entry unpriced: used whatever this CPU's timing
  test::CapturedLog log;
  Daemon daemon(o, dir / "state");
  const json status = daemon.await([](const json& s) {
    const json sessions = sessions_of(s);
    return preloaded(s) && sessions.size() == 1 && sessions[0].value("model_cache", "") == "hit";
  });
  EXPECT_TRUE(sessions_of(status)[0].value("preloaded", false));
  EXPECT_EQ(log.count("made again from its cache entry in the worker pid"), 1u) << log.text();
  EXPECT_TRUE(started_resident(model, daemon));
}

TEST(WarmNode, OnTheCpuASessionMadeFromTheModelIsLeftAsItIs) {
  const fs::path dir = test::fresh_dir("warm-node-not-remade");
  const test::ScopedEnv cache("ORTFLEET_CACHE", (dir / "cache").string());
  const std::string model = (dir / "m.onnx").string();
  fs::copy_file(test::mlp_model(), model);
  ServeOptions o = node();
  o.fold_after_s = 0.3;
  o.preload.models = {model};
  o.pool.config.session.model_cache_fill = ModelCacheFill::inline_start;
  test::CapturedLog log;
  Daemon daemon(o, dir / "state");
  daemon.await(preloaded);
  // Idle work done (its memory saved), the session as it was made.
  daemon.await([&](const json&) { return fs::exists(dir / "state" / detail::ServedModels::kFileName); });
  EXPECT_EQ(sessions_of(daemon.status())[0].value("model_cache", ""), "miss");
  EXPECT_EQ(log.count("made again from its cache entry"), 0u) << log.text();
}

// A parked device keeps no spare; a Fleet made for it (not yet started) restores it ahead of its request
// and the spare comes back; no job comes, and it parks again after the usual idle time.
TEST(WarmNode, AFleetBeingMadeRestoresAParkedDeviceAheadAndItParksAgainWhenNoJobComes) {
  const test::ScopedEnv parks("ORTFLEET_TEST_PARK_CPU", "1");
  const fs::path dir = test::fresh_dir("warm-node-ahead");
  ServeOptions o = node(/*isolate=*/true, /*park_after_s=*/0.5);
  o.preload.models = {fs::absolute(test::mlp_model()).string()};
  o.pool.unload_above_bytes = 0;  // kept through parking: this test is about the restore
  Daemon daemon(o, dir / "state");
  // Parked, and the spare the shared worker's sessions called for stopped: one worker, parked.
  json parked = daemon.await([](const json& s) { return preloaded(s) && all_parked(s) && s.at("devices").size() == 1; });
  const int shared_pid = parked.at("devices")[0].value("pid", 0);
  {
    Fleet job(test::mlp_model(), daemon.client());  // made, not started: its client said it comes
    const json restored = daemon.await([](const json& s) { return none_parked(s) && s.at("devices").size() == 2; }, 30);
    EXPECT_EQ(restored.at("devices")[0].value("pid", 0), shared_pid) << "restored, not replaced";
    EXPECT_EQ(restored.at("devices")[1].value("role", ""), "spare");
  }
  // The job never started: the pool parks again, its spare stopped again.
  daemon.await([](const json& s) { return all_parked(s) && s.at("devices").size() == 1; }, 60);
  // A job now: restored by its own request, its model resident.
  EXPECT_TRUE(started_resident(test::mlp_model(), daemon));
}

// A session whose weights are large (here: any) is dropped before its worker parks, the model
// "unloaded" (never handed out while so); a job's client that comes has it made again from the model
// cache entry ahead of its request.
TEST(WarmNode, ALargeSessionIsDroppedBeforeParkingAndMadeAgainFromItsEntryAheadOfItsJob) {
  const test::ScopedEnv parks("ORTFLEET_TEST_PARK_CPU", "1");
  const fs::path dir = test::fresh_dir("warm-node-unload");
  const test::ScopedEnv cache("ORTFLEET_CACHE", (dir / "cache").string());  // its entry made here, unpriced
  const std::string model = (dir / "m.onnx").string();
  fs::copy_file(test::mlp_model(), model);
  ServeOptions o = node(/*isolate=*/false, /*park_after_s=*/0.5);
  o.preload.models = {model};
  o.pool.unload_above_bytes = 1;
  // The entry made during the preload's own start: a background fill prices it, and on a busy CPU a
  // model this small may load no faster from it (an entry that saves nothing is not used).
  o.pool.config.session.model_cache_fill = ModelCacheFill::inline_start;
  Daemon daemon(o, dir / "state");
  const json parked = daemon.await([](const json& s) {
    return preloaded(s) && all_parked(s) && !s.at("devices")[0].value("unloaded", json::array()).empty();
  });
  EXPECT_EQ(parked.at("devices")[0].at("unloaded"), json::array({model}));
  EXPECT_TRUE(sessions_of(parked).empty()) << "a parked worker lists a session it dropped: " << parked.dump();
  {
    Fleet job(model, daemon.client());
    const json back = daemon.await([](const json& s) { return none_parked(s) && sessions_of(s).size() == 1; }, 30);
    EXPECT_EQ(sessions_of(back)[0].value("model_cache", ""), "hit") << "not made from the cache entry: " << back.dump();
    EXPECT_TRUE(back.at("devices")[0].value("unloaded", json::array()).empty());
    job.start();
    ASSERT_TRUE(job.wait(120));
    EXPECT_TRUE(job.status()[0].resident) << "the job's start made its session again";
  }
}

}  // namespace ortfleet
