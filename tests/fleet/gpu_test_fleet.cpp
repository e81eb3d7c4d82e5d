// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ortfleet/engine/session.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "test_support.hpp"

namespace ortfleet {

class GpuFleet : public ::testing::TestWithParam<Strategy> {};

TEST_P(GpuFleet, EveryGpuBecomesReadyWithEachStrategy) {
  ORTFLEET_REQUIRE_GPU();
  FleetOptions o;
  o.strategy = GetParam();
  Fleet fleet(test::resnet18_model(), o);
  EXPECT_EQ(fleet.devices().size(), static_cast<size_t>(gpu_count()));
  fleet.start();
  ASSERT_TRUE(fleet.wait()) << fleet.status().front().error;
  const auto inputs = random_inputs(fleet.inputs(), 1);
  for (const auto& d : fleet.devices()) {
    const auto out = fleet.run(d, inputs);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 1000})) << d.to_string();
  }
  for (const auto& s : fleet.status()) {
    EXPECT_EQ(s.provider, "plugin") << s.device.to_string() << " " << s.provider_note;
    EXPECT_GT(s.memory_bytes, 0u);
  }
  // Each GPU's context creation and session creation are on its own lane.
  const auto timeline = fleet.timeline();
  for (const auto& d : fleet.devices()) EXPECT_TRUE(timeline.phase_totals_ms(d.to_string()).count(phase::session_create));
}

INSTANTIATE_TEST_SUITE_P(AllGpus, GpuFleet,
                         ::testing::Values(Strategy::sequential, Strategy::threads, Strategy::processes, Strategy::fleet),
                         [](const auto& param_info) { return to_string(param_info.param); });

TEST(GpuFleetIsolation, ABadDeviceLeavesTheGoodOnesRunning) {
  ORTFLEET_REQUIRE_GPU();
  FleetOptions o;
  o.strategy = Strategy::fleet;
  o.devices = {Device::cuda(0), Device::cuda(63)};
  Fleet fleet(test::mlp_model(), o);
  fleet.start();
  EXPECT_FALSE(fleet.wait());
  EXPECT_TRUE(fleet.ready(Device::cuda(0)));
  EXPECT_FALSE(fleet.ready(Device::cuda(63)));
  EXPECT_EQ(fleet.run(Device::cuda(0), random_inputs(fleet.inputs(), 1)).size(), 1u);
}

TEST(GpuWorkerPool, NarrowedWorkersOnEveryGpuComputeWhatTheCpuComputesAndKeepSessionsResident) {
  ORTFLEET_REQUIRE_GPU();
  auto pool = std::make_shared<WorkerPool>(PoolOptions{});
  ASSERT_TRUE(pool->wait(600)) << pool->status_json();
  const auto status = nlohmann::json::parse(pool->status_json());
  for (const auto& w : pool->status()) EXPECT_FALSE(w.visible_devices.empty()) << w.device.to_string() << " sees every GPU";
  FleetOptions o;
  o.pool = pool;
  SessionSpec cpu;
  cpu.model_path = test::resnet18_model();
  Session reference(cpu);
  const auto inputs = random_inputs(reference.inputs(), 3);
  const auto want = reference.run(inputs);
  for (int round = 0; round < 2; ++round) {
    Fleet fleet(test::resnet18_model(), o);
    fleet.start();
    ASSERT_TRUE(fleet.wait()) << fleet.status().front().error;
    for (const auto& s : fleet.status()) {
      EXPECT_EQ(s.resident, round == 1) << s.device.to_string();
      EXPECT_EQ(s.provider, "plugin") << s.device.to_string();
      const auto out = fleet.run(s.device, inputs);
      ASSERT_EQ(out[0].element_count(), want[0].element_count());
      for (int64_t i = 0; i < out[0].element_count(); ++i) {
        EXPECT_NEAR(out[0].values<float>()[i], want[0].values<float>()[i], 2e-2) << s.device.to_string() << " at " << i;
      }
    }
  }
}

}  // namespace ortfleet
