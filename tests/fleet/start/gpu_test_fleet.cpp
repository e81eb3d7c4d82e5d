// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_tensor.hpp"
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

namespace {
void expect_near(const Tensor& got, const Tensor& want, const std::string& where) {
  ASSERT_EQ(got.element_count(), want.element_count()) << where;
  for (int64_t i = 0; i < got.element_count(); ++i) {
    ASSERT_NEAR(got.values<float>()[i], want.values<float>()[i], 2e-2) << where << " at " << i;
  }
}
}  // namespace

TEST(GpuWorkerTensors, DeviceInputsAndOutputsCrossToWorkersInPlace) {
  ORTFLEET_REQUIRE_GPU();
  FleetOptions o;
  o.strategy = Strategy::processes;  // a worker per GPU, even on one
  Fleet fleet(test::resnet18_model(), o);
  fleet.start();
  ASSERT_TRUE(fleet.wait()) << fleet.status().front().error;
  SessionSpec cpu;
  cpu.model_path = test::resnet18_model();
  Session reference(cpu);
  const auto inputs = random_inputs(reference.inputs(), 5);
  const auto want = reference.run(inputs);
  constexpr int kRuns = 20;
  for (const auto& d : fleet.devices()) {
    const Tensor input = copy_to_device(inputs[0], d);
    expect_near(fleet.run(d, {input})[0], want[0], d.to_string() + ", host outputs");
    for (int i = 0; i < kRuns; ++i) {
      const auto out = fleet.run(d, {input}, /*outputs_on_device=*/true);
      ASSERT_TRUE(out[0].on_gpu()) << d.to_string();
      ASSERT_EQ(out[0].device, d);
      if (i == 0 || i == kRuns - 1) expect_near(copy_to_host(out[0]), want[0], d.to_string() + ", device outputs");
    }
    // Outputs held at once each keep their own memory.
    const auto first = fleet.run(d, {input}, true);
    const auto second = fleet.run(d, {input}, true);
    EXPECT_NE(first[0].data, second[0].data) << d.to_string();
    expect_near(copy_to_host(first[0]), want[0], d.to_string() + ", first of two held");
  }
  const TransferCounters c = fleet.transfer_counters();
  const uint64_t gpus = fleet.devices().size();
  EXPECT_EQ(c.inputs_staged_bytes, 0u);
  EXPECT_EQ(c.outputs_staged_bytes, 0u);
  EXPECT_EQ(c.inputs_host_bytes, 0u);
  EXPECT_EQ(c.inputs_ipc_bytes, gpus * (kRuns + 3) * inputs[0].bytes);
  EXPECT_EQ(c.outputs_ipc_bytes, gpus * (kRuns + 2) * want[0].bytes);
  EXPECT_EQ(c.outputs_host_bytes, gpus * want[0].bytes);
  // Mapped once per allocation of the worker's arena, not once per run.
  EXPECT_LE(c.ipc_opens, gpus * 4) << c.ipc_opens << " mappings for " << gpus * (kRuns + 2) << " device outputs";
  EXPECT_GE(c.ipc_opens, gpus);

  if (fleet.devices().size() > 1) {
    // A tensor on another GPU than the worker's goes through host memory, and still gives the right outputs.
    const Tensor elsewhere = copy_to_device(inputs[0], fleet.devices()[1]);
    expect_near(fleet.run(fleet.devices()[0], {elsewhere})[0], want[0], "an input from another GPU");
    EXPECT_EQ(fleet.transfer_counters().inputs_staged_bytes, inputs[0].bytes);
  }
}

}  // namespace ortfleet
