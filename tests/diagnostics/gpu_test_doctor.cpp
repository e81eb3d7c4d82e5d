// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ortfleet/diagnostics/doctor.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(GpuDoctor, ListsEveryGpuAndALoadableCudaEp) {
  ORTFLEET_REQUIRE_GPU();
  const DoctorReport r = run_doctor();
  EXPECT_FALSE(r.has_failures()) << r.to_json();
  EXPECT_EQ(r.driver.gpus.size(), static_cast<size_t>(gpu_count()));
  ASSERT_TRUE(r.provider.has_value());
  EXPECT_EQ(r.provider->path, "plugin") << r.provider->plugin_error;
  EXPECT_EQ(r.provider->plugin_devices.size(), r.driver.gpus.size());
  for (const auto& a : r.architectures) EXPECT_EQ(a.support, "native") << a.architecture;
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["gpus"].size(), r.driver.gpus.size());
  for (const auto& lib : r.libraries) {
    if (lib.required) {
      EXPECT_TRUE(lib.found) << lib.name << ": " << lib.error;
    }
  }
}

}  // namespace ortfleet
