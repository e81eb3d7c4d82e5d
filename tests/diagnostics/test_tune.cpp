#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "diagnostics/round_budget.hpp"
#include "ortfleet/diagnostics/tune.hpp"
#include "ortfleet/synth/synth.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
/// A configuration measured in three rounds: ready at `ready` ± 10 ms, p50 `p50` ± 1%.
TuneResult result(const std::string& name, double ready, double p50) {
  TuneResult r;
  r.candidate.name = name;
  r.ready_ms = {ready - 10, ready, ready + 10};
  r.ready_mean_ms = ready;
  r.ready_sigma_ms = 10;
  r.p50_per_round = {p50 * 0.99, p50, p50 * 1.01};
  r.steady_p50_ms = p50;
  return r;
}

/// A configuration measured in these rounds.
TuneResult rounds(const std::string& name, std::vector<double> ready_ms, std::vector<double> p50s) {
  TuneResult r;
  r.candidate.name = name;
  double sum = 0;
  for (double x : ready_ms) sum += x;
  r.ready_mean_ms = sum / static_cast<double>(ready_ms.size());
  r.ready_ms = std::move(ready_ms);
  sum = 0;
  for (double x : p50s) sum += x;
  r.steady_p50_ms = sum / static_cast<double>(p50s.size());
  r.p50_per_round = std::move(p50s);
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
  EXPECT_EQ(report.start_verdict.rfind("default: ready time 800 ms ± 10.0 ms, 0.40 ± ", 0), 0u) << report.start_verdict;
  EXPECT_NE(report.start_verdict.find("x the first configuration's (2.00 s ± 10.0 ms), beyond noise"), std::string::npos) << report.start_verdict;
  // The first configuration serves fastest already: nothing to recommend for it.
  EXPECT_EQ(report.serve_fast, -1);
  EXPECT_NE(report.serve_verdict.find("none serves faster than the first configuration (exhaustive)"), std::string::npos) << report.serve_verdict;
}

TEST(Tune, ConfigurationsThatChangeTheOutputsAreNeverRecommended) {
  TuneReport report;
  report.results = {result("as given", 500, 2), result("disable GeluFusionL2", 300, 1)};
  report.results[1].outputs_differ = "output y element 0 is 1.1 instead of 1.2";
  choose(report);
  EXPECT_TRUE(report.results[0].pareto);
  EXPECT_FALSE(report.results[1].pareto);
  EXPECT_EQ(report.start_fast, -1);
  EXPECT_EQ(report.serve_fast, -1);
}

// tune named three different winners in three runs on one model, each timed once: a configuration is
// recommended only for a gain over the first beyond noise (as bench calls noise), and said to be
// within noise otherwise.
TEST(Tune, RecommendsOnlyAGainBeyondNoise) {
  TuneReport report;
  report.results = {rounds("as given", {500, 520, 480}, {2.0, 2.1, 1.9}), rounds("intra-op 1 thread", {470, 530, 475}, {1.95, 2.2, 1.9})};
  choose(report);
  EXPECT_EQ(report.start_fast, -1);
  EXPECT_NE(report.start_verdict.find("none starts faster than the first configuration (as given, 500 ms ± 20.0 ms) beyond noise: the "
                                      "lowest, intra-op 1 thread (492 ms ± 33.3 ms), is 0.98 ±"),
            std::string::npos)
      << report.start_verdict;
  EXPECT_NE(report.start_verdict.find("their ranges overlap"), std::string::npos) << report.start_verdict;
  EXPECT_EQ(report.serve_fast, -1);
  // Timed once each there is no spread: no gain can be told from noise, however large it looks.
  TuneReport once;
  once.results = {rounds("as given", {500}, {2}), rounds("model cache", {300}, {2})};
  choose(once);
  EXPECT_EQ(once.start_fast, -1);
  EXPECT_NE(once.start_verdict.find("one round has no spread"), std::string::npos) << once.start_verdict;
}

// Near-equals (within noise of each other) both beat the first beyond noise: the recommendation is the
// first of them in the sweep's order, not whichever the noise put lowest this time.
TEST(Tune, AmongNearEqualsTheFirstInTheSweepIsRecommended) {
  TuneReport report;
  report.results = {rounds("as given", {1000, 1010, 990}, {2, 2, 2}), rounds("model cache", {600, 640, 620}, {2, 2, 2}),
                    rounds("graph opt basic", {590, 630, 610}, {2, 2, 2}), rounds("slower", {800, 810, 790}, {2, 2, 2})};
  choose(report);
  EXPECT_EQ(report.start_fast, 1);
  EXPECT_NE(report.start_verdict.find("model cache: ready time 620 ms"), std::string::npos) << report.start_verdict;
  EXPECT_NE(report.start_verdict.find("the lowest mean of those beyond noise, graph opt basic, is within noise of it"), std::string::npos) << report.start_verdict;
  // Swapped by the noise, the answer stays.
  std::swap(report.results[1].ready_ms, report.results[2].ready_ms);
  std::swap(report.results[1].ready_mean_ms, report.results[2].ready_mean_ms);
  choose(report);
  EXPECT_EQ(report.start_fast, 1);
}

// A run of docs/results/2026-11-28/cpu-tune-repeat (tune-1.json, on a busy 2-core VM): the model cache beat
// the first configuration in every round, ranges apart, but the lowest mean was intra-op 1 thread, whose one
// slow round (256 ms) overlapped the first's range; tune said "none beyond noise" and wrote no config. A
// noisy lowest mean hides no gain beyond noise.
TEST(Tune, ANoisyLowestMeanHidesNoGainBeyondNoise) {
  TuneReport report;
  report.results = {rounds("as given", {279, 274, 278, 248, 281}, {2, 2, 2, 2, 2}), rounds("model cache", {153, 202, 221, 238, 150}, {2, 2, 2, 2, 2}),
                    rounds("graph opt basic", {210, 223, 250, 234, 239}, {2, 2, 2, 2, 2}),
                    rounds("intra-op 1 thread, no spinning", {200, 196, 256, 166, 119}, {2, 2, 2, 2, 2})};
  choose(report);
  EXPECT_EQ(report.start_fast, 1) << report.start_verdict;
  EXPECT_EQ(report.start_verdict.rfind("model cache: ready time 193 ms", 0), 0u) << report.start_verdict;
  EXPECT_NE(report.start_verdict.find("intra-op 1 thread, no spinning has a lower mean (187 ms"), std::string::npos) << report.start_verdict;
  // Nothing beyond noise at all: none, and the lowest is named.
  report.results.erase(report.results.begin() + 1);
  choose(report);
  EXPECT_EQ(report.start_fast, -1);
  EXPECT_NE(report.start_verdict.find("beyond noise: the lowest, intra-op 1 thread, no spinning"), std::string::npos) << report.start_verdict;
}

// The timed rounds are cut to the budget once the first shows what one costs, keeping a spread.
TEST(Tune, TheRoundsAreCutToTheBudgetButKeepASpread) {
  EXPECT_EQ(detail::rounds_that_fit(5, 0, 10, 100, 2), 5);    // no budget
  EXPECT_EQ(detail::rounds_that_fit(5, 300, 10, 50, 2), 5);   // 10 + 4 x 50 fits in 300
  EXPECT_EQ(detail::rounds_that_fit(5, 300, 100, 80, 2), 3);  // (300 - 100) / 80 + 1
  EXPECT_EQ(detail::rounds_that_fit(5, 300, 290, 200, 2), 2);  // past it already: still a spread
  EXPECT_EQ(detail::rounds_that_fit(1, 300, 290, 200, 2), 1);  // never more than asked
}

TEST(Tune, DisablesEachOfTheCostliestTransformersAndThemAllTogether) {
  TuneCandidate base{"as given", {}, {}};
  base.config.session.config_entries[kDisableOptimizersEntry] = "NchwcTransformer";  // the user's own stays disabled
  const std::vector<std::pair<std::string, double>> logged = {
      {"GeluFusionL2", 235}, {"ConstantFolding", 80}, {"MatMulAddFusion", 12}, {"CommonSubexpressionElimination", 9}, {"Idle", 0}};
  const auto c = transformer_candidates(base, logged, 3);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].name, "disable GeluFusionL2");
  EXPECT_EQ(c[0].disabled_transformers, std::vector<std::string>{"GeluFusionL2"});
  EXPECT_EQ(c[0].config.session.config_entries.at(kDisableOptimizersEntry), "NchwcTransformer;GeluFusionL2");
  EXPECT_EQ(c[2].name, "disable MatMulAddFusion");
  EXPECT_EQ(c[3].name, "disable the 3 costliest");  // short: the table's row keeps one line
  EXPECT_EQ(c[3].disabled_transformers, (std::vector<std::string>{"GeluFusionL2", "ConstantFolding", "MatMulAddFusion"}));
  EXPECT_EQ(c[3].config.session.config_entries.at(kDisableOptimizersEntry), "NchwcTransformer;GeluFusionL2;ConstantFolding;MatMulAddFusion");
  EXPECT_EQ(c[3].config.name, c[3].name);
  EXPECT_EQ(transformer_candidates(base, logged, 1).size(), 1u);     // one alone: no "all together"
  EXPECT_EQ(transformer_candidates(base, {{"Idle", 0}}, 3).size(), 0u);  // nothing that cost time
}

TEST(Tune, SaysWhatDisablingATransformerSavesAtStartAndCostsPerCall) {
  TuneReport report;
  report.transformers = {{"GeluFusionL2", 235}, {"ConstantFolding", 40}};
  report.results = {result("as given", 649, 2.0), result("disable GeluFusionL2", 420, 2.5), result("disable ConstantFolding", 660, 1.5),
                    result("disable both", 400, 9)};
  report.results[1].candidate.disabled_transformers = {"GeluFusionL2"};
  report.results[1].max_output_difference = 2e-6;
  report.results[2].candidate.disabled_transformers = {"ConstantFolding"};
  report.results[2].max_output_difference = 0;
  report.results[3].candidate.disabled_transformers = {"GeluFusionL2", "ConstantFolding"};
  report.results[3].outputs_differ = "output y element 3 is 0.5 instead of 0.7";
  const auto said = describe_disabled_transformers(report);
  ASSERT_EQ(said.size(), 3u);
  EXPECT_EQ(said[0].rfind("disabling GeluFusionL2 saves 229 ms at start and costs 0.5 ms per call (235 ms in the logged start)", 0), 0u) << said[0];
  EXPECT_EQ(said[1].rfind("disabling ConstantFolding adds 11 ms at start and saves 0.5 ms per call", 0), 0u) << said[1];
  EXPECT_EQ(said[2].rfind("disabling GeluFusionL2 and ConstantFolding saves 249 ms at start and costs 7 ms per call (275 ms", 0), 0u) << said[2];
  EXPECT_NE(said[2].find("not recommended"), std::string::npos) << said[2];
  EXPECT_NE(said[2].find("element 3 is 0.5 instead of 0.7"), std::string::npos) << said[2];
}

// On a node-heavy graph the CPU EP's transformers take measurable time: tune finds them in its
// logged start, disables them (ONNX Runtime must then not run them) and compares the outputs.
TEST(Tune, MeasuresTheCostliestTransformersDisabled) {
  synth::NodeHeavySpec spec;
  spec.nodes = 270;
  spec.width = 16;
  const std::string model = synth::write_node_heavy((test::scratch_dir() / "tune-nodes.onnx").string(), spec).path;
  TuneOptions o;
  o.model = model;
  o.candidates = {{"as given", {}, {}}};
  o.transformers_to_disable = 2;
  o.rounds = 1;
  o.steady_runs = 3;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_GE(r.transformers.size(), 2u);
  ASSERT_EQ(r.results.size(), 4u);  // as given, each of the two costliest, both
  for (size_t i = 1; i < r.results.size(); ++i) {
    const auto& x = r.results[i];
    ASSERT_TRUE(x.ok()) << x.candidate.name << ": " << x.error;
    EXPECT_FALSE(x.candidate.disabled_transformers.empty());
    EXPECT_GE(x.max_output_difference, 0.0) << x.candidate.name;  // compared
    EXPECT_TRUE(x.outputs_differ.empty()) << x.outputs_differ;
  }
  EXPECT_EQ(r.results[1].candidate.disabled_transformers, std::vector<std::string>{r.transformers[0].first});
  EXPECT_EQ(r.results[3].candidate.disabled_transformers.size(), 2u);
  ASSERT_EQ(r.transformer_findings.size(), 3u);
  EXPECT_EQ(r.transformer_findings[0].rfind("disabling " + r.transformers[0].first + " ", 0), 0u) << r.transformer_findings[0];
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j.at("transformers").size(), r.transformers.size());
  EXPECT_EQ(j.at("results")[3].at("disabled_transformers").size(), 2u);
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
  o.rounds = 2;
  o.steady_runs = 3;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_GE(r.results.size(), 3u);
  EXPECT_EQ(r.rounds, 2);
  for (const auto& x : r.results) {
    ASSERT_TRUE(x.ok()) << x.candidate.name << ": " << x.error;
    EXPECT_EQ(x.ready_ms.size(), 2u);  // a round each, interleaved
    EXPECT_EQ(x.p50_per_round.size(), 2u);
    EXPECT_GT(x.ready_mean_ms, x.first_inference_ms);
    EXPECT_GT(x.steady_p50_ms, 0.0);
    EXPECT_GT(x.memory_bytes, 0u);
  }
  EXPECT_FALSE(r.start_verdict.empty());
  EXPECT_FALSE(r.serve_verdict.empty());
  if (r.start_fast >= 0) {
    EXPECT_TRUE(r.results[static_cast<size_t>(r.start_fast)].pareto) << r.start_verdict;
  }
  EXPECT_EQ(nlohmann::json::parse(r.to_json())["results"].size(), r.results.size());
}

// Candidate configs and the private model cache live in a folder only we can enter, removed at the end.
// A dynamic batch: the recommendation says what a batch switch costs the configuration chosen.
TEST(Tune, MeasuresTheBatchSwitchOfTheChosenConfiguration) {
  TuneOptions o;
  o.model = test::dynamic_mlp_model();
  o.candidates = {{"as given", {}, {}}};
  o.transformers_to_disable = 0;
  o.rounds = 1;
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
  o.candidates = {TuneCandidate{"as given", {}, {}}};
  o.transformers_to_disable = 0;
  o.rounds = 1;
  o.steady_runs = 1;
  o.ortfleet_executable = test::bin("ortfleet");
  const TuneReport r = run_tune(o);
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_TRUE(r.results[0].ok()) << r.results[0].error;
  EXPECT_TRUE(std::filesystem::exists(tmp / planted / "theirs")) << "tune worked in, and removed, a folder someone else made";
  EXPECT_EQ(test::ortfleet_files_in(tmp), std::vector<std::string>{planted}) << "the work folder was left behind";
}

}  // namespace ortfleet
