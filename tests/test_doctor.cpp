#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "ortfleet/doctor.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
const Finding* find(const DoctorReport& r, const std::string& check) {
  for (const auto& f : r.findings) {
    if (f.check == check) return &f;
  }
  return nullptr;
}
}  // namespace

TEST(Doctor, ReportsTheRuntimeAndNeverFailsForLackOfAGpu) {
  const DoctorReport r = run_doctor();
  ASSERT_TRUE(r.runtime.has_value());
  const Finding* runtime = find(r, "runtime");
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(runtime->verdict, Verdict::ok);
  const Finding* gpu = find(r, "gpu");
  ASSERT_NE(gpu, nullptr);
  if (!test::have_gpu()) {
    EXPECT_EQ(gpu->verdict, Verdict::info);
    EXPECT_NE(gpu->summary.find("no usable GPU"), std::string::npos);
    EXPECT_FALSE(r.has_failures()) << r.to_json();
  }
  EXPECT_GT(r.machine.logical_cpus, 0);
}

TEST(Doctor, JsonCarriesEverySection) {
  const auto j = nlohmann::json::parse(run_doctor().to_json());
  for (const char* key : {"runtime", "driver", "gpus", "cuda_ep", "libraries", "architectures", "environment", "machine", "findings", "ok"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["runtime"]["loaded"], true);
  for (const auto& f : j["findings"]) EXPECT_TRUE(f.contains("verdict") && f.contains("summary") && f.contains("fix"));
}

TEST(Doctor, WarnsAboutEagerModuleLoadingAndExplainsTheFix) {
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  const DoctorReport r = run_doctor();
  ::unsetenv("CUDA_MODULE_LOADING");
  const Finding* f = find(r, "env:CUDA_MODULE_LOADING");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::warn);
  EXPECT_NE(f->fix.find("unset CUDA_MODULE_LOADING"), std::string::npos);
  EXPECT_EQ(find(run_doctor(), "env:CUDA_MODULE_LOADING"), nullptr);
}

TEST(Doctor, ChecksTheCudaEpsLibrariesWhenItIsThere) {
  const DoctorReport r = run_doctor();
  if (!r.cuda_ep) GTEST_SKIP() << "the CUDA EP library was not fetched";
  EXPECT_FALSE(r.libraries.empty());
  bool cudart = false;
  for (const auto& l : r.libraries) cudart = cudart || l.name == "libcudart.so.13";
  EXPECT_TRUE(cudart);
  EXPECT_FALSE(r.ep_cubin_architectures.empty());
}

}  // namespace ortfleet
