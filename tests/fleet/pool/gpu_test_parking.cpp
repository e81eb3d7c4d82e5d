// Parked workers on a GPU (issue 42): they skip themselves where no GPU is present, or where the driver
// has no checkpoint API (ctest label "gpu").
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "engine/cuda/process_checkpoint.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "test_support.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
class ParkingPool : public ::testing::Test {
 protected:
  void SetUp() override {
    ORTFLEET_REQUIRE_GPU();
    if (auto no = detail::WorkerParking::unavailable(Device::cuda(0))) GTEST_SKIP() << "workers cannot park here: " << *no;
    ServeOptions o;
    o.pool.devices = {Device::cuda(0)};
    o.socket_path = (dir_.path() / "pool.sock").string();
    o.park_after_s = 1;
    server_ = std::make_unique<PoolServer>(o);
    serving_ = std::thread([this] { server_->serve(); });
    ASSERT_TRUE(server_->pool().wait(600)) << server_->pool().status_json();
  }
  void TearDown() override {
    if (!server_) return;
    server_->stop();
    serving_.join();
  }
  FleetOptions client() const {
    FleetOptions o;
    o.devices = {Device::cuda(0)};
    o.pool_socket = server_->socket_path();
    return o;
  }
  json status() const { return json::parse(pool_status(server_->socket_path())); }
  /// Waits until every worker of the pool is parked (after the cache entry its first job missed is made
  /// in the background: the pool is busy until then); their pids.
  std::vector<int> await_parked() {
    for (int i = 0; i < 1800; ++i) {
      const json s = status();
      std::vector<int> pids;
      bool all = !s.at("devices").empty();
      for (const auto& d : s.at("devices")) {
        all = all && d.value("parked", false);
        pids.push_back(d.at("pid").get<int>());
      }
      if (all) return pids;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the idle pool never parked: " << status().dump(1);
    return {};
  }
  std::vector<float> run_once(Fleet& fleet, const std::vector<Tensor>& inputs) {
    const auto out = fleet.run(Device::cuda(0), inputs);
    return {out[0].values<float>(), out[0].values<float>() + out[0].element_count()};
  }

  detail::PrivateDir dir_ = detail::PrivateDir::temporary("ortfleet-test");
  std::unique_ptr<PoolServer> server_;
  std::thread serving_;
};

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}
}  // namespace

TEST_F(ParkingPool, AnIdlePoolHoldsNoGpuMemoryAndTheNextJobFindsItsModelResident) {
  const std::string model = test::resnet18_model();
  std::vector<Tensor> inputs;
  std::vector<float> before;
  {
    Fleet first(model, client());
    first.start();
    ASSERT_TRUE(first.wait(600)) << first.status()[0].error;
    inputs = random_inputs(first.inputs(), 4);
    before = run_once(first, inputs);
  }
  const auto pids = await_parked();
  for (const int pid : pids) {
    EXPECT_EQ(detail::ProcessCheckpoint::instance().state(pid), detail::ProcessCheckpoint::State::checkpointed) << pid;
  }
  const json parked = status();  // held: a range over status().at(...) would read a destroyed temporary
  for (const auto& d : parked.at("devices")) {
    EXPECT_EQ(d.at("gpu_memory_bytes"), 0) << d.dump();
    EXPECT_GT(d.at("host_pss_bytes").get<uint64_t>(), 0u) << "its GPU state lives in its host memory now";
  }
  Fleet second(model, client());
  second.start();
  ASSERT_TRUE(second.wait(600)) << second.status()[0].error;
  EXPECT_TRUE(second.status()[0].resident);
  EXPECT_LT(max_difference(run_once(second, inputs), before), 1e-4f);
}

// The park-during-claim race (issue 58): jobs arriving while the pool parks its workers (parking called
// at the same moment as each start, over and over) get a worker that is restored first, or never parked:
// every start is ready and gives what the first gave.
TEST_F(ParkingPool, JobsArrivingWhileThePoolParksRunOnRestoredWorkers) {
  const std::string model = test::resnet18_model();
  std::vector<Tensor> inputs;
  std::vector<float> want;  // what the first job gave
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE(round);
    // As the server's idle work does: a job that has come is seen (it keeps the pool from parking), and
    // one that comes while a worker parks has that worker restored before its start reaches it.
    std::atomic<bool> job_came{false};
    std::thread parking([&] { server_->pool().park_workers(10, [&] { return !job_came.load(); }); });
    Fleet job(model, client());
    job_came = true;
    job.start();
    const bool ready = job.wait(600);
    parking.join();
    ASSERT_TRUE(ready) << job.status()[0].error;
    if (want.empty()) {
      inputs = random_inputs(job.inputs(), 4);
      want = run_once(job, inputs);
    }
    // Parked while the job held its session, the worker would not answer these runs.
    for (int run = 0; run < 2; ++run) EXPECT_LT(max_difference(run_once(job, inputs), want), 1e-4f);
  }
}

TEST_F(ParkingPool, AParkedWorkerKilledLosesOnlyItselfAndPoolStopLeavesNothing) {
  {
    Fleet first(test::resnet18_model(), client());
    first.start();
    ASSERT_TRUE(first.wait(600));
  }
  auto pids = await_parked();
  ASSERT_FALSE(pids.empty());
  ASSERT_EQ(::kill(pids.front(), SIGKILL), 0);
  Fleet next(test::mlp_model(), client());
  next.start();
  ASSERT_TRUE(next.wait(600)) << next.status()[0].error;
  EXPECT_EQ(next.run(Device::cuda(0), random_inputs(next.inputs(), 1)).size(), 1u);
  next.shutdown();
  pids = await_parked();
  // As a daemon does: `pool stop` returns once the socket is gone, which the server removes as it ends.
  std::thread stopper([this] { pool_stop(server_->socket_path()); });
  serving_.join();
  server_.reset();
  stopper.join();
  for (const int pid : pids) {
    for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NE(::kill(pid, 0), 0) << "worker " << pid << " outlived pool stop";
  }
}

}  // namespace ortfleet
