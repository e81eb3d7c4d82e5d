#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ortfleet/diagnostics/tune.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
TuneResult result(const std::string& name, double ready, double p50) {
  TuneResult r;
  r.candidate.name = name;
  r.ready_ms = {ready};
  r.ready_median_ms = ready;
  r.steady_p50_ms = p50;
  return r;
}
}  // namespace

TEST(Tune, ParetoFrontAndRecommendations) {
  TuneReport report;
  report.results = {result("exhaustive", 2000, 5), result("heuristic", 900, 6), result("slow-and-slow", 2500, 7),
                    result("default", 800, 9), result("broken", 100, 1)};
  report.results[4].error = "failed";
  choose(report);
  EXPECT_TRUE(report.results[0].pareto);
  EXPECT_TRUE(report.results[1].pareto);
  EXPECT_FALSE(report.results[2].pareto);
  EXPECT_TRUE(report.results[3].pareto);
  EXPECT_FALSE(report.results[4].pareto);  // failures are never recommended
  EXPECT_EQ(report.start_fast, 3);
  EXPECT_EQ(report.serve_fast, 0);
}

TEST(Tune, SweepsDependOnTheDevice) {
  const auto gpu = default_sweep(Device::cuda(0), {}, false);
  const auto cpu = default_sweep(Device::cpu(), {}, false);
  auto has = [](const std::vector<TuneCandidate>& s, const std::string& name) {
    return std::any_of(s.begin(), s.end(), [&](const TuneCandidate& c) { return c.name == name; });
  };
  EXPECT_TRUE(has(gpu, "conv=HEURISTIC"));
  EXPECT_TRUE(has(gpu, "CUDA_MODULE_LOADING=EAGER"));
  EXPECT_TRUE(has(gpu, "cuda graph"));
  EXPECT_FALSE(has(cpu, "conv=HEURISTIC"));
  EXPECT_TRUE(has(cpu, "model cache"));
  EXPECT_LT(default_sweep(Device::cpu(), {}, true).size(), cpu.size());
  EXPECT_EQ(gpu.front().config.session, SessionOptions{});  // the first candidate is the configuration as given
  EXPECT_EQ(gpu.front().config.cuda, CudaOptions{});
}

TEST(Tune, SweepsInFreshProcessesAndRecommends) {
  TuneOptions o;
  o.model = test::resnet18_model();
  o.quick = true;
  o.steady_runs = 3;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_GE(r.results.size(), 3u);
  for (const auto& x : r.results) {
    ASSERT_TRUE(x.ok()) << x.candidate.name << ": " << x.error;
    EXPECT_GT(x.ready_median_ms, x.first_inference_ms);
    EXPECT_GT(x.steady_p50_ms, 0.0);
    EXPECT_GT(x.memory_bytes, 0u);
  }
  EXPECT_GE(r.start_fast, 0);
  EXPECT_GE(r.serve_fast, 0);
  EXPECT_TRUE(r.results[static_cast<size_t>(r.start_fast)].pareto);
  EXPECT_EQ(nlohmann::json::parse(r.to_json())["results"].size(), r.results.size());
}

// Candidate configs and the private model cache live in a folder only we can enter, removed at the end.
// A dynamic batch: the recommendation says what a batch switch costs the configuration chosen.
TEST(Tune, MeasuresTheBatchSwitchOfTheChosenConfiguration) {
  TuneOptions o;
  o.model = test::dynamic_mlp_model();
  o.candidates = {{"as given", {}}};
  o.steady_runs = 3;
  o.shape_switch_seconds = 0.2;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_TRUE(r.shape_switch.measured());
  EXPECT_NE(r.shapes_advice.find("a batch switch costs"), std::string::npos) << r.shapes_advice;
  EXPECT_TRUE(nlohmann::json::parse(r.to_json()).at("shape_switch").at("cost_ms").get<double>() >= 0);
  o.model = test::mlp_model();
  EXPECT_TRUE(run_tune(o).shapes_advice.empty());  // fixed batch: no advice
}

TEST(Tune, WorksInAPrivateFolderThatItRemoves) {
  const std::filesystem::path tmp = test::scratch_dir() / "tune-tmp";
  // What another user would plant at the name a predictable scheme picks: it must be left alone.
  const std::string planted = "ortfleet-tune-" + std::to_string(::getpid());
  std::filesystem::create_directories(tmp / planted / "theirs");
  const test::ScopedEnv tmpdir("TMPDIR", tmp.string());
  TuneOptions o;
  o.model = test::mlp_model();
  o.candidates = {TuneCandidate{"as given", {}}};
  o.steady_runs = 1;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_TRUE(r.results[0].ok()) << r.results[0].error;
  EXPECT_TRUE(std::filesystem::exists(tmp / planted / "theirs")) << "tune worked in, and removed, a folder someone else made";
  EXPECT_EQ(test::ortfleet_files_in(tmp), std::vector<std::string>{planted}) << "the work folder was left behind";
}

}  // namespace ortfleet
