#include <gtest/gtest.h>

#include <cstdlib>

#include "base/slurm.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/base/error.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(Devices, AllMeansEveryGpuOrOneCpuSession) {
  EXPECT_EQ(parse_devices("all", 0), std::vector<Device>{Device::cpu()});
  EXPECT_EQ(parse_devices("", 2), (std::vector<Device>{Device::cuda(0), Device::cuda(1)}));
}

TEST(Devices, ListsRangesAndPrefixes) {
  EXPECT_EQ(parse_devices("0,2", 4), (std::vector<Device>{Device::cuda(0), Device::cuda(2)}));
  EXPECT_EQ(parse_devices("1-3", 4), (std::vector<Device>{Device::cuda(1), Device::cuda(2), Device::cuda(3)}));
  EXPECT_EQ(parse_devices("cuda:0, cuda:3", 4), (std::vector<Device>{Device::cuda(0), Device::cuda(3)}));
  EXPECT_EQ(parse_devices("cpu*3", 0), (std::vector<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2)}));
  EXPECT_EQ(parse_devices("cpu,cpu:1", 0), (std::vector<Device>{Device::cpu(0), Device::cpu(1)}));
}

TEST(Devices, AGpuThatDoesNotExistNamesTheOnesThatDo) {
  try {
    parse_devices("4", 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU cuda:4 (this machine has 4 GPUs: cuda:0 to cuda:3)"), std::string::npos) << e.what();
  }
  try {
    parse_devices("0", 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use `devices=cpu`"), std::string::npos) << e.what();
  }
}

// `--devices cpu*99` on 2 cores started 99 workers, and left a pool of 298 processes (issue 50): more CPU
// sessions than this process may use are refused in one line naming the limit; as many as that are taken.
TEST(Devices, MoreCpuSessionsThanCoresAreRefusedNamingTheLimit) {
  const int cores = detail::usable_cpus();
  EXPECT_EQ(select_devices("cpu*" + std::to_string(cores)).devices.size(), static_cast<size_t>(cores));
  const std::string e = test::error_of([&] { select_devices("cpu*" + std::to_string(cores + 1)); });
  EXPECT_NE(e.find(std::to_string(cores + 1) + " CPU sessions asked for, and this process may use " + std::to_string(cores) + " CPU"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("Ask for cpu*" + std::to_string(cores) + " or fewer"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  std::vector<Device> listed;  // cpu:0 ... named one by one: the same count
  for (int i = 0; i <= cores; ++i) listed.push_back(Device::cpu(i));
  EXPECT_THROW(check_cpu_devices_fit(listed), Error);
  listed.pop_back();
  listed.push_back(Device::cuda(0));  // GPUs are not CPU sessions
  EXPECT_NO_THROW(check_cpu_devices_fit(listed));
}

TEST(Devices, MalformedListsAreRejected) {
  for (const char* bad : {"gpu0", "1-", "3-1", "cpu*0", "cpu*x", ",", "0,,1", "-1", "cuda:", "cpu:x"}) {
    EXPECT_THROW(parse_devices(bad, 4), Error) << bad;
  }
  EXPECT_THROW(parse_devices("0,0", 4), Error);
}

TEST(Devices, ToStringAndParseRoundTrip) {
  for (const Device& d : {Device::cpu(), Device::cpu(3), Device::cuda(0), Device::cuda(7)}) {
    EXPECT_EQ(Device::parse(d.to_string()), d) << d.to_string();
  }
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(Devices, GpuCountHonoursCudaVisibleDevicesWithoutInitialisingCuda) {
  const char* original = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = original ? original : "";
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const int all = gpu_count();
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(gpu_count(), 0);
  ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
  EXPECT_EQ(gpu_count(), 0);
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  EXPECT_EQ(gpu_count(), std::min(all, 1));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(gpu_count(), all);
  if (original != nullptr) ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
}

TEST(Devices, ProbeNeverThrowsAndExplainsAMissingDriver) {
  const CudaDriverInfo& info = probe_cuda_driver();
  if (!info.loaded) {
    EXPECT_FALSE(info.error.empty());
    EXPECT_TRUE(info.gpus.empty());
  } else {
    for (const auto& g : info.gpus) {
      EXPECT_FALSE(g.name.empty());
      EXPECT_GT(g.total_memory, 0u);
      EXPECT_GE(g.compute_major, 3);
    }
  }
}

TEST(Devices, AWorkerIsNarrowedToItsOwnEntryOfCudaVisibleDevices) {
  {
    const test::ScopedEnv unset("CUDA_VISIBLE_DEVICES", std::nullopt);
    EXPECT_EQ(narrowed_visible_devices(Device::cuda(2)), "2");
    EXPECT_EQ(narrowed_visible_devices(Device::cpu(1)), std::nullopt);
  }
  {
    // The user's own list keeps working: UUIDs, MIG instances and indices are picked by position.
    const test::ScopedEnv uuids("CUDA_VISIBLE_DEVICES", "GPU-aaaa, MIG-bbbb/1/2 ,3");
    EXPECT_EQ(narrowed_visible_devices(Device::cuda(0)), "GPU-aaaa");
    EXPECT_EQ(narrowed_visible_devices(Device::cuda(1)), "MIG-bbbb/1/2");
    EXPECT_EQ(narrowed_visible_devices(Device::cuda(2)), "3");
    EXPECT_EQ(narrowed_visible_devices(Device::cuda(3)), std::nullopt) << "past the list: not narrowed";
  }
  const test::ScopedEnv none("CUDA_VISIBLE_DEVICES", "");
  EXPECT_EQ(narrowed_visible_devices(Device::cuda(0)), std::nullopt);
}

TEST(Devices, ANarrowedWorkerCallsItsGpuOrdinalZero) {
  EXPECT_EQ(cuda_ordinal(Device::cuda(3)), 3);
  set_narrowed_device(Device::cuda(3));
  EXPECT_EQ(cuda_ordinal(Device::cuda(3)), 0);
  EXPECT_EQ(cuda_ordinal(Device::cuda(1)), 1) << "only the worker's own device is renamed";
  EXPECT_EQ(cuda_ordinal(Device::cpu(3)), 3);
  set_narrowed_device(Device::cpu());
  EXPECT_EQ(cuda_ordinal(Device::cuda(3)), 3);
}

}  // namespace ortfleet
