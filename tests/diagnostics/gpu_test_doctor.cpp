// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "process/child_process.hpp"
#include "ortfleet/synth/synth.hpp"
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

// Issue 59: `profile` of EfficientNet-B4 on 1 x H100 with an empty cache printed the whole profile, then
// aborted (std::length_error, rc 134); another run hung after printing until killed at 90 s. profile,
// tune, bench and doctor on a GPU, with an empty then a filled cache: each exits 0, says nothing of a
// terminate, and leaves no process behind (found by a mark in their environment).
namespace {
std::vector<int> marked_processes(const std::string& mark) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    for (std::string variable; std::getline(environ, variable, '\0');) {
      if (variable == mark) {
        pids.push_back(std::stoi(name));
        break;
      }
    }
  }
  return pids;
}
}  // namespace

TEST(GpuDiagnostics, ProfileTuneBenchAndDoctorExitCleanlyAndLeaveNothing) {
  ORTFLEET_REQUIRE_GPU();
  const fs::path dir = test::scratch_dir() / "gpu-diagnostics-exit";
  fs::remove_all(dir);
  fs::create_directories(dir);
  synth::ResNetSpec spec;
  spec.depth = 18;
  spec.dynamic_batch = true;  // profile and tune then measure a batch switch in their own process, on the GPU
  const std::string model = synth::write_resnet((dir / "r18d.onnx").string(), spec).path;
  const std::string mark_value = "gpu-diagnostics-" + std::to_string(::getpid());
  const std::map<std::string, std::string> env = {
      {"ORTFLEET_CACHE", (dir / "cache").string()}, {"XDG_RUNTIME_DIR", (dir / "run").string()}, {"GPU_DIAGNOSTICS_MARK", mark_value}};
  fs::create_directories(dir / "run");
  fs::permissions(dir / "run", fs::perms::owner_all, fs::perm_options::replace);
  const std::vector<std::vector<std::string>> commands = {
      {"profile", model, "--device", "cuda:0", "--runs", "5"},
      {"profile", model, "--device", "cuda:0", "--runs", "5"},  // the cache filled by then
      {"tune", model, "--device", "cuda:0", "--quick", "--repeat", "3", "--runs", "5", "--disable-transformers", "1"},
      {"bench", model, "--devices", "cuda:0", "--runs", "2", "--no-anchors", "--budget", "300"},
      {"doctor", model, "--device", "cuda:0"}};
  for (const auto& command : commands) {
    std::vector<std::string> argv = {test::bin("ortfleet")};
    argv.insert(argv.end(), command.begin(), command.end());
    const auto r = detail::run_child(argv, env, "", 1200);
    EXPECT_EQ(r.exit_code, 0) << command.front() << ": " << r.describe();
    EXPECT_EQ(r.stderr_tail.find("terminate called"), std::string::npos) << command.front() << ": " << r.stderr_tail;
    // What a command leaves running it says (bench's next-job rows stop their pools); nothing may stay.
    std::vector<int> left = marked_processes("GPU_DIAGNOSTICS_MARK=" + mark_value);
    for (int i = 0; i < 300 && !left.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a pool's workers end a moment after it
      left = marked_processes("GPU_DIAGNOSTICS_MARK=" + mark_value);
    }
    EXPECT_TRUE(left.empty()) << command.front() << " left " << left.size() << " processes, the first pid " << left.front();
  }
  detail::run_child({test::bin("ortfleet"), "-q", "pool", "stop"}, env, "", 60);
}

}  // namespace ortfleet
