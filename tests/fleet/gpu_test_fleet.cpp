// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include "ortfleet/fleet/fleet.hpp"
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

}  // namespace ortfleet
