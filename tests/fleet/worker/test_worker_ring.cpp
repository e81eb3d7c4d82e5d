// Runs on worker processes through the request ring (fleet/worker/worker_ring.hpp): outputs, large inputs
// and outputs, pipelining, many threads, and workers that die or stop with runs in flight.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <future>
#include <thread>

#include "base/environment.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/synth/synth.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace {

using test::identity_model;

FleetOptions worker_options(int devices = 1) {
  FleetOptions o;
  o.strategy = Strategy::processes;
  for (int i = 0; i < devices; ++i) o.devices.push_back(Device::cpu(i));
  return o;
}

/// A batch of the identity model with values that say where they are.
Tensor identity_input(int64_t batch, float seed) {
  Tensor t = Tensor::host_copy("input", ElementType::float32, {batch, 16}, nullptr);
  for (int64_t i = 0; i < t.element_count(); ++i) t.values<float>()[i] = seed + static_cast<float>(i);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.type == b.type && a.shape == b.shape && a.bytes == b.bytes && std::memcmp(a.data, b.data, a.bytes) == 0;
}

class WorkerRing : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet_ = std::make_unique<Fleet>(identity_model(), worker_options());
    fleet_->start();
    ASSERT_TRUE(fleet_->wait());
  }
  std::unique_ptr<Fleet> fleet_;
};

TEST_F(WorkerRing, OutputsAreTheInputsWhateverTheirSize) {
  // 1 row; 3,000 rows (a response larger than the first slots: the ring grows); 40,000 rows (2.5 MB,
  // a request ten times the first slots).
  for (const int64_t batch : {1, 3'000, 40'000, 3}) {
    const Tensor input = identity_input(batch, static_cast<float>(batch));
    const auto out = fleet_->run(Device::cpu(), {input});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, "Identity_0");
    EXPECT_TRUE(same_bytes(out[0], input)) << "batch " << batch;
  }
}

TEST_F(WorkerRing, OutputsMatchASessionInThisProcess) {
  Fleet mlp(test::dynamic_mlp_model(), worker_options());
  mlp.start();
  ASSERT_TRUE(mlp.wait());
  SessionSpec spec;
  spec.model_path = test::dynamic_mlp_model();
  Session local(spec);
  for (const int64_t batch : {1, 7, 5'000}) {
    auto inputs = random_inputs(local.inputs(), static_cast<uint64_t>(batch), batch);
    const auto want = local.run(inputs);
    const auto got = mlp.run(Device::cpu(), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bytes(got[i], want[i])) << "batch " << batch;
  }
}

TEST_F(WorkerRing, TransferCountersSayHowTheBytesTravelled) {
  const Tensor input = identity_input(4, 1.0f);
  fleet_->run(Device::cpu(), {input});
  fleet_->run_async(Device::cpu(), {input}).get();
  const TransferCounters c = fleet_->transfer_counters();
  EXPECT_EQ(c.inputs_host_bytes, 2 * input.bytes);
  EXPECT_EQ(c.outputs_host_bytes, 2 * input.bytes);  // the identity hands its input back
  EXPECT_EQ(c.inputs_ipc_bytes + c.inputs_staged_bytes + c.outputs_ipc_bytes + c.outputs_staged_bytes + c.ipc_opens, 0u);
}

TEST_F(WorkerRing, OutputsOnDeviceFromACpuWorkerAreHostTensors) {
  // A worker session on the CPU has no device to leave its outputs on: they come back as a session
  // in this process returns them, not as an error.
  const Tensor input = identity_input(2, 3.0f);
  const auto out = fleet_->run(Device::cpu(), {input}, /*outputs_on_device=*/true);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].on_gpu());
  EXPECT_TRUE(same_bytes(out[0], input));
  EXPECT_EQ(fleet_->transfer_counters().outputs_staged_bytes, 0u);
}

TEST_F(WorkerRing, RunAsyncKeepsManyRunsInFlight) {
  // More runs than the ring has slots, all submitted before any is waited for.
  std::vector<Tensor> inputs;
  std::vector<std::future<std::vector<Tensor>>> futures;
  for (int i = 0; i < 50; ++i) {
    inputs.push_back(identity_input(1 + i % 5, static_cast<float>(i) * 100));
    futures.push_back(fleet_->run_async(Device::cpu(), {inputs.back()}));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    const auto out = futures[i].get();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(same_bytes(out[0], inputs[i])) << "run " << i;
  }
  // A large one through run_async: its response needs a bigger ring, which waits for the others.
  const Tensor large = identity_input(3'000, 0.5f);
  auto big = fleet_->run_async(Device::cpu(), {large});
  auto small = fleet_->run_async(Device::cpu(), {inputs[0]});
  EXPECT_TRUE(same_bytes(big.get()[0], large));
  EXPECT_TRUE(same_bytes(small.get()[0], inputs[0]));
}

TEST_F(WorkerRing, ManySmallRunsFromSeveralThreads) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        const Tensor input = identity_input(1 + (i + t) % 3, static_cast<float>(t * 10'000 + i));
        // Half synchronous, half through futures: both share the ring's slots.
        const auto out = i % 2 == 0 ? fleet_->run(Device::cpu(), {input}) : fleet_->run_async(Device::cpu(), {input}).get();
        if (out.size() != 1 || !same_bytes(out[0], input)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(WorkerRing, AWorkerKilledWithRunsInFlightFailsThemNamingItsDevice) {
  const int pid = fleet_->status().front().pid;
  // Stopped, the worker takes no request: every run below is in flight when it is killed.
  test::stop_process(pid);
  std::vector<std::future<std::vector<Tensor>>> futures;
  for (int i = 0; i < 5; ++i) futures.push_back(fleet_->run_async(Device::cpu(), {identity_input(1, 0)}));
  std::thread blocked([&] {
    try {
      fleet_->run(Device::cpu(), {identity_input(1, 0)});
      ADD_FAILURE() << "a killed worker answered";
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), Device::cpu().to_string()) << e.what();
    }
  });
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  blocked.join();
  for (auto& f : futures) {
    try {
      f.get();
      ADD_FAILURE() << "a killed worker answered";
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), Device::cpu().to_string()) << e.what();
      EXPECT_NE(std::string(e.what()).find("the worker process for cpu"), std::string::npos) << e.what();
    }
  }
  // The device has failed for good, and says why.
  try {
    fleet_->run(Device::cpu(), {identity_input(1, 0)});
    ADD_FAILURE() << "a run on a dead worker succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SIGKILL"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fleet_->status().front().state, DeviceState::failed);
}

TEST_F(WorkerRing, AWorkerThatDoesNotAnswerInTimeIsKilled) {
  FleetOptions o = worker_options();
  o.run_timeout_s = 0.3;
  Fleet fleet(identity_model(), o);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const int pid = fleet.status().front().pid;
  test::stop_process(pid);
  auto pending = fleet.run_async(Device::cpu(), {identity_input(1, 0)});
  try {
    pending.get();
    FAIL() << "a stopped worker answered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish a run within 0.3 s"), std::string::npos) << e.what();
    EXPECT_EQ(e.where(), Device::cpu().to_string());
  }
  EXPECT_TRUE(::kill(pid, 0) != 0 && errno == ESRCH) << "the stopped worker was not killed";
}

TEST_F(WorkerRing, ErrorsOfTheSessionComeBackThroughTheRing) {
  try {
    fleet_->run(Device::cpu(), {Tensor::host_copy("input", ElementType::float32, {2, 3}, nullptr)});  // 3 is not 16
    FAIL() << "a wrongly shaped input ran";
  } catch (const Error& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
  // The worker is fine afterwards.
  EXPECT_TRUE(same_bytes(fleet_->run(Device::cpu(), {identity_input(2, 1)})[0], identity_input(2, 1)));
}

TEST(WorkerSocketPath, RunsWithoutTheRingWhenItIsSwitchedOff) {
  const test::ScopedEnv no_ring(detail::env_name(detail::EnvVar::worker_ring), "0");
  Fleet fleet(identity_model(), worker_options());
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const Tensor input = identity_input(40'000, 2);
  EXPECT_TRUE(same_bytes(fleet.run(Device::cpu(), {input})[0], input));
  auto a = fleet.run_async(Device::cpu(), {identity_input(1, 1)});
  auto b = fleet.run_async(Device::cpu(), {identity_input(2, 2)});
  EXPECT_TRUE(same_bytes(a.get()[0], identity_input(1, 1)));
  EXPECT_TRUE(same_bytes(b.get()[0], identity_input(2, 2)));
}

TEST(FleetRunAsync, SessionsInThisProcessRunOnThreads) {
  FleetOptions o = worker_options(2);
  o.strategy = Strategy::threads;
  Fleet fleet(identity_model(), o);
  fleet.start();
  ASSERT_TRUE(fleet.wait());
  const Tensor input = identity_input(3, 9);
  auto a = fleet.run_async(Device::cpu(0), {input});
  auto b = fleet.run_async(Device::cpu(1), {input});
  EXPECT_TRUE(same_bytes(a.get()[0], input));
  EXPECT_TRUE(same_bytes(b.get()[0], input));
  EXPECT_THROW(fleet.run_async(Device::cuda(5), {input}), Error);  // not part of the fleet
}

}  // namespace
}  // namespace ortfleet
