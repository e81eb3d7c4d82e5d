#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <set>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "engine/shapes/shape_policy.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
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

TEST(Doctor, GpuFindingsNameMigAndPersistenceMode) {
  CudaDriverInfo driver;
  driver.loaded = true;
  driver.driver_version = "580.159.04";
  for (int i = 0; i < 3; ++i) {
    GpuInfo g;
    g.ordinal = i;
    g.name = "NVIDIA H200";
    g.mig_enabled = i == 2;
    g.persistence_mode = i == 0;
    driver.gpus.push_back(g);
  }
  auto finding = [&](const std::string& name) -> std::optional<Finding> {
    for (const auto& f : gpu_findings(driver)) {
      if (f.check == name) return f;
    }
    return std::nullopt;
  };
  const auto gpu = finding("gpu");
  ASSERT_TRUE(gpu);
  EXPECT_NE(gpu->summary.find("3 GPU(s)"), std::string::npos) << gpu->summary;
  const auto mig = finding("gpu-mig");
  ASSERT_TRUE(mig);
  EXPECT_NE(mig->summary.find("cuda:2"), std::string::npos);
  const auto off = finding("gpu-persistence");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->verdict, Verdict::warn);
  EXPECT_NE(off->summary.find("off on cuda:1, cuda:2"), std::string::npos) << off->summary;

  for (auto& g : driver.gpus) g.persistence_mode = true;
  const auto on = finding("gpu-persistence");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->verdict, Verdict::ok);

  for (auto& g : driver.gpus) g.persistence_mode.reset();  // NVML absent: nothing to say
  EXPECT_FALSE(finding("gpu-persistence"));

  driver.loaded = false;
  driver.error = "cuInit failed";
  const auto none = gpu_findings(driver);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].verdict, Verdict::info);
}

// A model with a dim of no fixed size: doctor gives the device's one shape advice (on the CPU it asked to
// declare the shapes served, where profile said one session serves every shape).
TEST(Doctor, GivesTheDevicesOneShapeAdviceForADynamicModel) {
  DoctorOptions o;
  o.model = test::dynamic_mlp_model();
  o.ortfleet_executable = test::bin("ortfleet");
  const DoctorReport r = run_doctor(o);
  const auto shapes = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.check == "model-shapes"; });
  ASSERT_NE(shapes, r.findings.end());
  EXPECT_NE(shapes->summary.find(detail::shape_advice(Device::cpu())), std::string::npos) << shapes->summary;
  EXPECT_EQ(shapes->summary.find("declare"), std::string::npos) << shapes->summary;
}

// "1 other ONNX Runtime copies found" named none: each other copy is listed, where it lies and how it was found.
TEST(Doctor, ListsEachOtherRuntimeCopyItCounts) {
  const DoctorReport r = run_doctor();
  ASSERT_TRUE(r.runtime);
  std::set<std::string> others;
  for (const auto& c : r.runtime_candidates) {
    std::error_code ec;
    const std::string path = std::filesystem::weakly_canonical(c.path, ec).string();
    if (c.exists && path != r.runtime->library_path) others.insert(path);
  }
  const auto found = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.check == "runtime-others"; });
  if (others.empty()) {
    EXPECT_EQ(found, r.findings.end());
    GTEST_SKIP() << "only one ONNX Runtime copy on this machine";
  }
  ASSERT_NE(found, r.findings.end());
  EXPECT_EQ(found->summary.rfind(std::to_string(others.size()) + " other ONNX Runtime " + (others.size() == 1 ? "copy" : "copies") + " found: ", 0), 0u)
      << found->summary;
  for (const auto& path : others) EXPECT_NE(found->summary.find(path + " ("), std::string::npos) << path << " is not in: " << found->summary;
}

}  // namespace ortfleet
