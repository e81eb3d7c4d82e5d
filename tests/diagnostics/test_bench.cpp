#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "diagnostics/python_anchor.hpp"
#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/base/error.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
/// A cold row of 2 devices that ran these rounds.
BenchRow timed_row(const std::string& label, std::vector<double> wall_ms, const std::string& model_cache = "") {
  BenchRow r;
  r.label = label;
  r.family = "ortfleet";
  r.strategy = label;
  r.device_count = 2;
  r.wall_ms = std::move(wall_ms);
  r.model_cache = model_cache;
  return r;
}
}  // namespace

TEST(BenchVerdict, CallsADifferenceWithinNoiseWhatItIs) {
  // The same detector three times gave each of these the lead: their ranges overlap.
  const std::vector<BenchRow> rows = {timed_row("sequential", {980, 1100, 1040, 1010, 1060}), timed_row("threads", {990, 1080, 1000, 1050, 1030}),
                                      timed_row("fleet", {960, 1090, 1020, 1000, 1070})};
  const BenchVerdict v = bench_verdict(rows, 2, "2 GPUs");
  EXPECT_EQ(v.fastest, "fleet");
  EXPECT_NE(v.headline.find("no start-up of 2 GPUs is faster than the others beyond noise (5 rounds each)"), std::string::npos) << v.headline;
  ASSERT_EQ(v.comparisons.size(), 2u);
  for (const auto& c : v.comparisons) EXPECT_TRUE(c.within_noise) << c.row;
  EXPECT_NE(v.lines[0].find("within noise of threads"), std::string::npos) << v.lines[0];
  EXPECT_NE(v.lines[0].find("their ranges overlap"), std::string::npos) << v.lines[0];
}

TEST(BenchVerdict, AttributesTheFleetsGainToTheModelCache) {
  // The default bench's "5.34x faster than sequential" came from a cache hit: without the cache the
  // fleet starts as fast as sequential.
  const std::vector<BenchRow> rows = {timed_row("sequential", {5300, 5350, 5400, 5330, 5370}),
                                      timed_row("fleet", {1000, 1010, 990, 1005, 995}),
                                      timed_row("fleet, no model cache", {5290, 5380, 5320, 5410, 5350}, "off")};
  const BenchVerdict v = bench_verdict(rows, 2, "2 GPUs");
  EXPECT_EQ(v.fastest, "fleet");
  EXPECT_NE(v.headline.find("fastest start-up of 2 GPUs: fleet, 1.00 s"), std::string::npos) << v.headline;
  EXPECT_NE(v.headline.find("5 rounds, mean ± σ"), std::string::npos) << v.headline;
  ASSERT_EQ(v.comparisons.size(), 1u) << "the start without the cache is the fleet's own variant, not a rival";
  EXPECT_FALSE(v.comparisons[0].within_noise);
  EXPECT_NEAR(v.comparisons[0].ratio, 5.35, 0.01);
  EXPECT_GT(v.comparisons[0].sigma, 0.0);
  EXPECT_EQ(v.comparisons[0].gain_from, "model cache");
  EXPECT_NE(v.lines[0].find("5.35 ± "), std::string::npos) << v.lines[0];
  EXPECT_NE(v.lines[0].find("faster than sequential"), std::string::npos) << v.lines[0];
  EXPECT_NE(v.lines[0].find("the model cache's gain: without it the fleet is within noise of sequential"), std::string::npos) << v.lines[0];
}

TEST(BenchVerdict, PartsAGainBetweenTheCacheAndTheStrategy) {
  const std::vector<BenchRow> rows = {timed_row("sequential", {3000, 3020, 2980, 3010, 2990}), timed_row("fleet", {1000, 1010, 990, 1005, 995}),
                                      timed_row("fleet, no model cache", {2000, 2010, 1990, 2005, 1995}, "off")};
  const BenchVerdict v = bench_verdict(rows, 2, "2 GPUs");
  ASSERT_EQ(v.lines.size(), 1u);
  EXPECT_TRUE(v.comparisons[0].gain_from.empty());
  EXPECT_NE(v.lines[0].find("of it the model cache gives 2.00 ± "), std::string::npos) << v.lines[0];
  EXPECT_NE(v.lines[0].find("the fleet's start without it 1.50 ± "), std::string::npos) << v.lines[0];
}

TEST(BenchVerdict, OneRoundSaysTheNoiseIsNotKnown) {
  const std::vector<BenchRow> rows = {timed_row("sequential", {1300}), timed_row("fleet", {1000})};
  const BenchVerdict v = bench_verdict(rows, 2, "2 GPUs");
  EXPECT_FALSE(v.comparisons[0].noise_known);
  EXPECT_FALSE(v.comparisons[0].within_noise);
  EXPECT_NE(v.lines[0].find("1.30x faster than sequential"), std::string::npos) << v.lines[0];
  EXPECT_NE(v.lines[0].find("one round: no spread, so the noise is not known"), std::string::npos) << v.lines[0];
  EXPECT_NE(v.headline.find("1 round"), std::string::npos) << v.headline;
}

TEST(Bench, TimesEveryStrategyInFreshProcessesWithBaselines) {
  BenchOptions o;
  o.model = test::mlp_model();
  o.devices = {Device::cpu(0), Device::cpu(1)};
  o.runs = 2;
  o.warmup_rounds = 0;
  o.anchors = false;
  o.ortfleet_executable = test::bin("ortfleet");
  const BenchReport r = run_bench(o);
  // Four strategies on 2 devices, the fleet's first start (empty cache) and its start without the
  // cache, the two one-device baselines, then the warm-pool rows: a new session and a resident one, on
  // 2 devices and on 1; last the next job's: the first job, and the next one right after it (a CPU pool
  // does not park: no parked rows).
  ASSERT_EQ(r.rows.size(), 14u);
  EXPECT_EQ(r.rows[12].label, "first job (empty cache, leaves a warm pool)");
  EXPECT_EQ(r.rows[13].label, "next job, right after the first");
  for (const auto& row : r.rows) {
    ASSERT_TRUE(row.ok()) << row.label << ": " << row.error;
    EXPECT_EQ(row.wall_ms.size(), 2u);
    EXPECT_LE(row.min_ms, row.median_ms);
    EXPECT_LE(row.median_ms, row.max_ms);
    EXPECT_GT(row.min_ms, 0.0);
    EXPECT_FALSE(row.median_report.timeline.events().empty());
  }
  EXPECT_EQ(r.rows[3].label, "fleet");
  EXPECT_EQ(r.rows[3].baseline, "fleet (1 device)");
  EXPECT_EQ(r.rows[0].baseline, "plain (1 device)");
  EXPECT_NEAR(r.rows[3].ratio_to_one * r.rows[3].efficiency, 1.0, 1e-9);
  EXPECT_FALSE(r.fastest.empty());
  EXPECT_EQ(r.comparisons.size(), 3u) << "the warm rows and the cache's other states are not compared as cold starts";
  EXPECT_EQ(r.rows[4].label, "fleet, first start (empty cache)");
  EXPECT_EQ(r.rows[4].model_cache, "empty");
  EXPECT_EQ(r.rows[5].label, "fleet, no model cache");
  EXPECT_EQ(r.rows[5].model_cache, "off");
  for (const size_t i : {size_t{4}, size_t{5}}) {
    EXPECT_TRUE(r.rows[i].baseline.empty()) << r.rows[i].label;
    EXPECT_NE(r.rows[i].label, r.fastest);
  }
  // Each device of the first start found its cache empty; the cached fleet row found the entry the
  // rounds before it made.
  for (const auto& d : r.rows[4].median_report.devices) EXPECT_EQ(d.model_cache, "miss");
  for (const auto& d : r.rows[5].median_report.devices) EXPECT_EQ(d.model_cache, "off");
  const auto said = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(said("first start on an empty cache: ")) << "the first start is not set beside the start without the cache";
  EXPECT_TRUE(said("cached start: "));
  // The spread of each ratio to one device, from each round's own pair.
  EXPECT_EQ(r.rows[3].ratio_per_round.size(), 2u);
  EXPECT_TRUE(said("fleet on 2 devices / 1 device: "));
  EXPECT_EQ(r.rows[8].label, "fleet on a warm pool");
  EXPECT_EQ(r.rows[8].warm, "warm pool");
  EXPECT_EQ(r.rows[8].baseline, "fleet on a warm pool (1 device)");
  EXPECT_EQ(r.rows[9].label, "fleet, resident");
  EXPECT_EQ(r.rows[9].warm, "resident");
  for (size_t i = 8; i < 12; ++i) {
    const bool resident = r.rows[i].warm == "resident";
    for (const auto& d : r.rows[i].median_report.devices) EXPECT_EQ(d.resident, resident) << r.rows[i].label;
  }
  EXPECT_EQ(r.fastest.find("pool"), std::string::npos);
  EXPECT_EQ(r.fastest.find("resident"), std::string::npos);
  EXPECT_FALSE(r.skipped.empty());  // the anchors were turned off, and the report says so
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["rows"].size(), 14u);
  EXPECT_NE(r.to_markdown().find("| fleet | 2 |"), std::string::npos);
}

// What auto chooses from: the cold ortfleet starts of every GPU, not Python's, a warm pool's or one device's.
TEST(Bench, ABenchOfSeveralGpusIsThisMachinesStartRecord) {
  auto row = [](std::string label, std::string family, int devices, double median, std::string warm = {}) {
    BenchRow r;
    r.label = std::move(label);
    r.family = std::move(family);
    r.device_count = devices;
    r.wall_ms = {median};
    r.median_ms = median;
    r.warm = std::move(warm);
    return r;
  };
  BenchReport report;
  report.model = "resnet50.onnx";
  report.rows = {row("fleet", "ortfleet", 2, 741),          row("threads", "ortfleet", 2, 1210),
                 row("python threads", "onnxruntime-python", 2, 1900), row("fleet (1 device)", "ortfleet", 1, 500),
                 row("fleet on a warm pool", "ortfleet", 2, 90, "warm pool"), row("processes", "ortfleet", 2, 990)};
  report.rows.back().error = "cuda:1 failed";
  const std::vector<std::string> gpus = {"NVIDIA H200", "NVIDIA H200"};
  const auto record = start_record_of(report, {Device::cuda(0), Device::cuda(1)}, gpus);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->device_count, 2);
  EXPECT_EQ(record->gpus, gpus);
  EXPECT_EQ(record->model, "resnet50.onnx");
  EXPECT_EQ(record->source, "bench");
  EXPECT_EQ(record->measured_at.size(), std::string("2026-11-23T06:00:00Z").size()) << record->measured_at;
  EXPECT_EQ(record->start_ms, (std::map<std::string, double>{{"fleet", 741}, {"threads", 1210}}));
  EXPECT_FALSE(start_record_of(report, {Device::cpu(0), Device::cpu(1)}, gpus));  // CPU sessions: auto needs no record
  EXPECT_FALSE(start_record_of(report, {Device::cuda(0)}, gpus));
}

TEST(Bench, AFailingCaseIsReportedNotFatal) {
  BenchOptions o;
  o.model = test::mlp_model();
  o.devices = {Device::cpu(0), Device::cuda(9)};
  o.strategies = {Strategy::sequential};
  o.runs = 1;
  o.warmup_rounds = 0;
  o.anchors = false;
  o.ortfleet_executable = test::bin("ortfleet");
  const BenchReport r = run_bench(o);
  ASSERT_FALSE(r.rows.empty());
  EXPECT_FALSE(r.rows[0].ok());
  EXPECT_FALSE(r.rows[0].error.empty());
}

TEST(Bench, RejectsNonsense) {
  BenchOptions o;
  o.model = test::mlp_model();
  o.runs = 0;
  EXPECT_THROW(run_bench(o), Error);
  o.runs = 1;
  o.model = "/nonexistent.onnx";
  EXPECT_THROW(run_bench(o), Error);
}

TEST(Bench, TheFleetFromPythonIsComparedWithoutTheInterpretersStart) {
  BenchRow python;
  python.label = "fleet from Python";
  python.family = "ortfleet-python";
  python.strategy = "python-ortfleet";
  python.device_count = 2;
  python.wall_ms = {650, 660, 640};
  python.median_ms = 650;
  python.process_start_ms = {50, 60, 52};
  BenchRow cli;
  cli.label = "fleet";
  cli.family = "ortfleet";
  cli.strategy = "fleet";
  cli.device_count = 2;
  cli.wall_ms = {570};
  cli.median_ms = 570;
  const auto note = python_fleet_note({python, cli});
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note, "fleet from Python: 52 ms of its 650 ms went to starting the Python interpreter, before `import ortfleet`; "
                   "from there to ready: 598 ms, 1.05x the command line's fleet (570 ms)");
  cli.device_count = 1;  // a fleet on another number of devices is no comparison
  EXPECT_FALSE(python_fleet_note({python, cli}).has_value());
}

// The onnxruntime Python anchor that died on a GPU said "SIGSEGV" and nothing more: the cause is named
// as doctor names it for ortfleet's own core, when the Python package's core lacks CUDA.
TEST(Bench, AnAnchorsCrashOnACpuOnlyCoreNamesTheCause) {
  const std::string crash = "was killed by signal SIGSEGV (Segmentation fault)";
  const std::string cause = detail::anchor_crash_cause(crash, "python3", {"AzureExecutionProvider", "CPUExecutionProvider"});
  EXPECT_NE(cause.find("onnxruntime in python3 has a core built without CUDA (its providers: AzureExecutionProvider, CPUExecutionProvider)"),
            std::string::npos)
      << cause;
  EXPECT_NE(cause.find("crash inside ONNX Runtime with SIGSEGV"), std::string::npos) << cause;
  EXPECT_NE(cause.find("Install onnxruntime-gpu"), std::string::npos) << cause;
  EXPECT_EQ(detail::anchor_crash_cause(crash, "python3", {"CUDAExecutionProvider", "CPUExecutionProvider"}), "");
  EXPECT_EQ(detail::anchor_crash_cause("exited with code 1: ModuleNotFoundError", "python3", {"CPUExecutionProvider"}), "");
  // The whole path, with an interpreter that answers as a CPU-only onnxruntime does.
  const auto fake = test::scratch_dir() / "cpu-only-python";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho 'AzureExecutionProvider CPUExecutionProvider'\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  const std::string explained = detail::explain_anchor_failure("cuda:0: a pool process died (a crash inside ONNX Runtime?)", fake.string());
  EXPECT_NE(explained.find("; the cause: onnxruntime in " + fake.string() + " has a core built without CUDA"), std::string::npos) << explained;
}

}  // namespace ortfleet
