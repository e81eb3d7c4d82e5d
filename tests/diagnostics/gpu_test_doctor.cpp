// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "process/child_process.hpp"
#include "synth/onnx_writer.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

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
  // These machines' drivers (r580) park: doctor says so, as pool status does.
  const auto parking = std::find_if(r.findings.begin(), r.findings.end(), [](const auto& f) { return f.check == "parking"; });
  ASSERT_NE(parking, r.findings.end());
  EXPECT_EQ(parking->verdict, Verdict::ok) << parking->summary;
  for (const auto& lib : r.libraries) {
    if (lib.required) {
      EXPECT_TRUE(lib.found) << lib.name << ": " << lib.error;
    }
  }
}

}  // namespace ortfleet

namespace ortfleet {

// ONNX Runtime 1.29's CUDA EP library calls back into the core for Resize with sizes; a core built
// without CUDA cannot serve the call, and the process dies (the CPU-only core of
// com.github.asus4.onnxruntime did on an H100). Where this core runs it, there is nothing to work
// around and the test skips; where it crashes, the locator must name the Resize and find that it
// runs on the CPU EP inside the same session, outputs checked, and the config it writes must start.
TEST(GpuDoctor, ACrashingNodeIsWorkedAroundOnTheCpuEpWithItsOutputsChecked) {
  ORTFLEET_REQUIRE_GPU();
  namespace o = onnx;
  const fs::path dir = test::scratch_dir() / "gpu-workaround";
  fs::create_directories(dir);
  const std::string model = (dir / "resize_sizes.onnx").string();
  o::GraphParts g;
  g.name = "resize_sizes";
  g.inputs.push_back(o::value_info("x", o::DataType::float32, {o::Dim(1), o::Dim(2), o::Dim(8), o::Dim(8)}));
  g.outputs.push_back(o::value_info("y", o::DataType::float32, {o::Dim(1), o::Dim(2), o::Dim(16), o::Dim(16)}));
  g.initializers.push_back(o::int64_tensor("sizes", {4}, {1, 2, 16, 16}));
  g.nodes.push_back(o::node("Relu", "relu", {"x"}, {"r"}));
  g.nodes.push_back(o::node("Resize", "upsample", {"r", "", "", "sizes"}, {"y"},
                            {o::Attribute::String("mode", "linear"), o::Attribute::String("coordinate_transformation_mode", "half_pixel")}));
  {
    std::ofstream out(model, std::ios::binary);
    o::model(std::move(g), 17, {}).write(out);
  }
  const std::map<std::string, std::string> env = {{"ORTFLEET_CACHE", (dir / "cache").string()}, {"ORTFLEET_AUTO_POOL", "0"}};
  const auto r = detail::run_child({test::bin("ortfleet"), "-q", "doctor", model, "--locate-crash", "--device", "cuda:0", "--out",
                                    (dir / "located").string(), "--json"},
                                   env, "", 600);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  const auto located = nlohmann::json::parse(r.stdout_text);
  if (!located.at("crashed").get<bool>()) GTEST_SKIP() << "this ONNX Runtime core runs Resize with sizes on the CUDA EP";
  EXPECT_EQ(located.at("node").at("op_type"), "Resize");
  ASSERT_FALSE(located.at("workarounds").empty()) << located.dump(2);
  EXPECT_TRUE(located.at("workarounds").back().at("works").get<bool>()) << located.dump(2);
  const std::string config = located.at("workaround_config");
  ASSERT_TRUE(fs::exists(config));
  // As doctor prints it: auto (a worker, the crash being remembered), the model cache left out.
  const auto started = detail::run_child({test::bin("ortfleet"), "-q", "start", model, "--devices", "cuda:0", "--config", config}, env, "", 300);
  EXPECT_EQ(started.exit_code, 0) << started.describe();
}

}  // namespace ortfleet
