#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

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
  // 2 devices and on 1; last the next job's: the first job, the next one right after it, the first job
  // of a new model on a node daemon started before it, and its next job after that daemon was stopped and
  // started again (it made the model it served resident first; a CPU pool does not park: no parked rows).
  ASSERT_EQ(r.rows.size(), 16u);
  EXPECT_EQ(r.rows[12].label, "first job, leaves a pool");
  EXPECT_EQ(r.rows[13].label, "next job");
  EXPECT_EQ(r.rows[14].label, "new model, node daemon");
  EXPECT_EQ(r.rows[14].model_cache, "empty");
  EXPECT_EQ(r.rows[15].label, "first job after the daemon starts");
  for (const auto& d : r.rows[15].median_report.devices) EXPECT_TRUE(d.resident) << "the restarted daemon did not make what it served resident";
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
  EXPECT_EQ(r.rows[4].label, "fleet, empty cache");
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
  EXPECT_TRUE(said("fleet on 2 devices / fleet (1 device): "));
  EXPECT_EQ(r.rows[8].label, "fleet, warm pool");
  EXPECT_EQ(r.rows[8].warm, "warm pool");
  EXPECT_EQ(r.rows[8].baseline, "fleet, warm pool (1 device)");
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
  EXPECT_EQ(j["rows"].size(), 16u);
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
    r.mean_ms = median;
    r.warm = std::move(warm);
    return r;
  };
  BenchReport report;
  report.model = "resnet50.onnx";
  report.rows = {row("fleet", "ortfleet", 2, 741),          row("threads", "ortfleet", 2, 1210),
                 row("python threads", "onnxruntime-python", 2, 1900), row("fleet (1 device)", "ortfleet", 1, 500),
                 row("fleet, warm pool", "ortfleet", 2, 90, "warm pool"), row("processes", "ortfleet", 2, 990)};
  report.rows.back().error = "cuda:1 failed";
  const std::vector<std::string> gpus = {"NVIDIA H200", "NVIDIA H200"};
  const auto record = start_record_of(report, {Device::cuda(0), Device::cuda(1)}, gpus);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->device_count, 2);
  EXPECT_EQ(record->gpus, gpus);
  EXPECT_EQ(record->model, "resnet50.onnx");
  EXPECT_EQ(record->source, "bench");
  EXPECT_EQ(record->measured_at.size(), std::string("2026-11-23T06:00:00Z").size()) << record->measured_at;
  EXPECT_EQ(record->start_ms, (std::map<StartWay, double>{{StartWay::workers, 741}, {StartWay::threads, 1210}}));
  EXPECT_FALSE(start_record_of(report, {Device::cpu(0), Device::cpu(1)}, gpus));  // CPU sessions: auto needs no record
  // One GPU too (in a worker, or in this process: bench's "fleet, one process" row): its rows of one device.
  const auto one = start_record_of(report, {Device::cuda(0)}, gpus);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->start_ms, (std::map<StartWay, double>{{StartWay::workers, 500}}));
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
  python.mean_ms = 650;
  python.process_start_ms = {50, 60, 52};
  BenchRow cli;
  cli.label = "fleet";
  cli.family = "ortfleet";
  cli.strategy = "fleet";
  cli.device_count = 2;
  cli.wall_ms = {570};
  cli.mean_ms = 570;
  const auto note = python_fleet_note({python, cli});
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note, "fleet from Python: 54.0 ms of its 650 ms went to starting the Python interpreter, before `import ortfleet`; "
                   "from there to ready: 596 ms, 1.05x the command line's fleet (570 ms)");
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

namespace ortfleet {

namespace {

BenchRow bench_row(const std::string& label, int devices, std::vector<double> wall_ms, const std::string& baseline = {},
                   const std::string& warm = {}) {
  BenchRow r;
  r.label = label;
  r.family = "ortfleet";
  r.strategy = "fleet";
  r.device_count = devices;
  r.wall_ms = std::move(wall_ms);
  r.baseline = baseline;
  r.warm = warm;
  return r;
}

/// "503 ms", "1.23 s", "54.0 ms" back into milliseconds, as duration_text wrote them.
double ms_of(const std::string& text) {
  const double value = std::stod(text);
  if (text.find(" us") != std::string::npos) return value / 1000;
  if (text.find(" ms") != std::string::npos) return value;
  return value * 1000;  // " s"
}

/// A ratio printed to two decimals from two times printed to three significant digits: it agrees with
/// the times within rounding.
void expect_recomputes(double printed, double numerator_ms, double denominator_ms, const std::string& where) {
  const double ratio = numerator_ms / denominator_ms;
  EXPECT_NEAR(printed, ratio, 0.006 + 0.011 * ratio) << where;
}

/// The Markdown table's rows, by label: their cells.
std::map<std::string, std::vector<std::string>> markdown_rows(const std::string& markdown) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream lines(markdown);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    rows[cells[0]] = cells;
  }
  return rows;
}

}  // namespace

// One statistic through the whole bench: its table's means, its ratio columns, its verdict and its
// notes, so that every ratio recomputes from the table it stands under. Rounds skewed by one slow
// round each make the mean and the median differ: ratios of medians would not recompute (the bench
// said "0.66x (428 ms vs 645 ms)" under a table of 680 ms and 1.04 s).
TEST(Bench, EveryRatioItPrintsRecomputesFromTheMeansOfItsTable) {
  BenchReport report;
  report.model = "m.onnx";
  report.floor_ms = 200;
  report.rows = {bench_row("fleet", 2, {400, 410, 700}, "fleet (1 device)"), bench_row("threads", 2, {500, 510, 520}, "plain (1 device)"),
                 bench_row("plain (1 device)", 1, {250, 260, 600}), bench_row("fleet (1 device)", 1, {300, 310, 320}),
                 bench_row("fleet, warm pool", 2, {100, 110, 300}, "fleet, warm pool (1 device)", "warm pool"),
                 bench_row("fleet, warm pool (1 device)", 1, {90, 95, 100}, "", "warm pool")};
  conclude_bench(report, 2, "2 CPU sessions");
  const auto row = [&](const std::string& label) { return *std::find_if(report.rows.begin(), report.rows.end(), [&](const BenchRow& r) { return r.label == label; }); };
  EXPECT_DOUBLE_EQ(row("fleet").ratio_to_one, row("fleet").mean_ms / row("fleet (1 device)").mean_ms);
  EXPECT_DOUBLE_EQ(row("threads").ratio_to_one, row("threads").mean_ms / row("plain (1 device)").mean_ms);
  EXPECT_DOUBLE_EQ(row("plain (1 device)").floor_ratio, row("plain (1 device)").mean_ms / 200);
  EXPECT_EQ(nlohmann::json::parse(report.to_json()).at("statistic"), "mean");

  // The printed table: each ratio column from the printed means of its row and its baseline's row.
  const auto table = markdown_rows(report.to_markdown());
  const BenchTable columns = bench_table(report);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(columns.columns.begin(), columns.columns.end(), name) - columns.columns.begin());
  };
  const size_t mean = column("mean ± σ");
  ASSERT_LT(column("vs 1 device"), columns.columns.size());
  ASSERT_LT(column("vs floor"), columns.columns.size());
  const auto printed_mean = [&](const std::string& label) { return ms_of(table.at(label).at(mean)); };
  for (const auto& r : report.rows) {
    const auto& cells = table.at(r.label);
    if (!r.baseline.empty()) {
      expect_recomputes(std::stod(cells.at(column("vs 1 device"))), printed_mean(r.label), printed_mean(r.baseline), r.label + " vs 1 device");
    }
    if (r.floor_ratio > 0) expect_recomputes(std::stod(cells.at(column("vs floor"))), printed_mean(r.label), 200, r.label + " vs floor");
  }
  // The verdict: each "R ± S x faster than ROW (M ± s)" from the table's means of ROW and the fastest.
  EXPECT_EQ(report.fastest, "fleet");
  ASSERT_EQ(report.comparisons.size(), 1u);
  const std::string& line = report.comparisons.front();
  EXPECT_NE(line.find("threads"), std::string::npos) << line;
  std::smatch ratio;
  ASSERT_TRUE(std::regex_search(line, ratio, std::regex(R"((\d+\.\d+)(?: ± \d+\.\d+)?x)"))) << line;
  expect_recomputes(std::stod(ratio[1].str()), printed_mean("threads"), printed_mean("fleet"), line);
  // The notes: the warm pool's ratio to the cold fleet, from the same means.
  const auto warm = std::find_if(report.notes.begin(), report.notes.end(), [](const std::string& n) { return n.rfind("on a warm pool", 0) == 0; });
  ASSERT_NE(warm, report.notes.end());
  const size_t x = warm->find("x the cold fleet's time");
  ASSERT_NE(x, std::string::npos) << *warm;
  expect_recomputes(std::stod(warm->substr(warm->rfind(' ', x) + 1)), printed_mean("fleet, warm pool"), printed_mean("fleet"), *warm);
}

namespace {

/// The timeline of a start of `gpus` workers: worker i's cuInit from 100 + 10 i ms to `init_end[i]`, then
/// its context for 100 ms, each in a process of its own; ready at `ready_ms`.
StartReport start_on_gpus(const std::vector<int64_t>& init_end_ms, int64_t ready_ms) {
  constexpr int64_t ms = 1'000'000;
  StartReport s;
  s.spawn_ns = 0;
  s.ready_ns = ready_ms * ms;
  s.timeline = Timeline(0);
  s.timeline.add({phase::process_start, "process", 0, 5 * ms, 1, {}});
  for (size_t i = 0; i < init_end_ms.size(); ++i) {
    const int pid = 100 + static_cast<int>(i);
    const std::string lane = "cuda:" + std::to_string(i);
    const int64_t begin = (100 + 10 * static_cast<int64_t>(i)) * ms;
    s.timeline.add({phase::runtime_load, lane, begin, begin + 50 * ms, pid, {}});  // not the driver's: left out
    s.timeline.add({phase::cuda_init, lane, begin, init_end_ms[i] * ms, pid, {}});
    s.timeline.add({phase::cuda_context, lane, init_end_ms[i] * ms, (init_end_ms[i] + 100) * ms, pid, {}});
  }
  return s;
}

}  // namespace

// The driver's start, per worker, from a start's timeline: the 4-GPU timeline's cuInit of 400-870 ms a
// worker and contexts ending one after another, as a synthetic multi-worker timeline (no GPU needed).
TEST(DriverStart, ReadsEachWorkersInitAndContextAndHowTheyOverlap) {
  const StartReport s = start_on_gpus({500, 700, 900, 1000}, 1600);
  const DriverStart d = driver_start_of(s.timeline, s.spawn_ns, s.ready_ns);
  ASSERT_EQ(d.workers.size(), 4u);
  EXPECT_EQ(d.gpus, 4);
  EXPECT_DOUBLE_EQ(d.workers[0].init_ms, 400);
  EXPECT_DOUBLE_EQ(d.workers[0].context_ms, 100);
  EXPECT_DOUBLE_EQ(d.workers[3].driver_ms(), 970);
  EXPECT_EQ(d.workers[3].lanes, "cuda:3");
  EXPECT_DOUBLE_EQ(d.total_ms, 500 + 690 + 880 + 970);
  EXPECT_DOUBLE_EQ(d.span_ms, 1000);  // from the first cuInit (100 ms) to the last context (1100 ms)
  EXPECT_DOUBLE_EQ(d.last_context_ms, 1100);
  EXPECT_DOUBLE_EQ(d.fleet_ms, 1600);
  EXPECT_DOUBLE_EQ(d.share(), 1000.0 / 1600);
  EXPECT_DOUBLE_EQ(d.overlap(), 3040.0 / 1000);
  const std::string said = d.summary();
  EXPECT_NE(said.find("cuInit and a CUDA context in each of 4 worker processes): 500 ms to 970 ms a worker, 3.04 s in all"), std::string::npos) << said;
  EXPECT_NE(said.find("for 1.00 s of the fleet's 1.60 s"), std::string::npos) << said;
  EXPECT_NE(said.find("warm pool"), std::string::npos) << said;
  EXPECT_EQ(nlohmann::json::parse(d.to_json()).at("workers").size(), 4u);

  // One after another: the overlap says the driver serialised them.
  StartReport serial = start_on_gpus({}, 1000);
  constexpr int64_t ms = 1'000'000;
  for (int i = 0; i < 2; ++i) {
    const int64_t begin = (100 + 300 * i) * ms;
    serial.timeline.add({phase::cuda_init, "cuda:" + std::to_string(i), begin, begin + 200 * ms, 10 + i, {}});
    serial.timeline.add({phase::cuda_context, "cuda:" + std::to_string(i), begin + 200 * ms, begin + 300 * ms, 10 + i, {}});
  }
  const DriverStart one_by_one = driver_start_of(serial.timeline, 0, 1000 * ms);
  EXPECT_DOUBLE_EQ(one_by_one.overlap(), 1.0);
  EXPECT_NE(one_by_one.summary().find("one after another"), std::string::npos) << one_by_one.summary();

  // A start in one process: its cuInit on the process lane, a context per GPU, one worker.
  StartReport single = start_on_gpus({}, 800);
  single.timeline.add({phase::cuda_init, "process", 50 * ms, 400 * ms, 7, {}});
  single.timeline.add({phase::cuda_context, "cuda:0", 400 * ms, 500 * ms, 7, {}});
  single.timeline.add({phase::cuda_context, "cuda:1", 400 * ms, 520 * ms, 7, {}});
  const DriverStart in_one = driver_start_of(single.timeline, 0, 800 * ms);
  ASSERT_EQ(in_one.workers.size(), 1u);
  EXPECT_EQ(in_one.workers[0].contexts, 2);
  EXPECT_EQ(in_one.workers[0].lanes, "process, cuda:0, cuda:1");
  EXPECT_FALSE(driver_start_of(start_on_gpus({}, 500).timeline, 0, 500 * ms).measured());  // a CPU start: nothing to say
}

// On more than one GPU the bench says what the driver's start cost the fleet, how much of the fleet's
// time beyond one GPU it explains, and what avoids it; on CPU sessions it says nothing of it.
TEST(Bench, OnSeveralGpusItSaysTheDriversShareOfTheFleetsTime) {
  BenchReport report;
  report.rows = {bench_row("fleet", 4, {1600}, "fleet (1 device)"), bench_row("fleet (1 device)", 1, {900})};
  report.rows[0].median_report = start_on_gpus({500, 700, 900, 1000}, 1600);
  report.rows[1].median_report = start_on_gpus({400}, 900);
  conclude_bench(report, 4, "4 GPUs");
  EXPECT_EQ(report.driver_start.gpus, 4);
  const auto note = std::find_if(report.notes.begin(), report.notes.end(), [](const std::string& n) { return n.find("the driver's start") != std::string::npos; });
  ASSERT_NE(note, report.notes.end());
  // One GPU's: 100 ms to 500 ms = 400 ms; the fleet's 1.00 s: 600 ms of the 700 ms the fleet took beyond it.
  EXPECT_NE(note->find("One GPU's fleet spent 400 ms of its 900 ms there: of the 700 ms the fleet of 4 took beyond it, the driver's start "
                       "accounts for 600 ms (86%)"),
            std::string::npos)
      << *note;
  EXPECT_TRUE(nlohmann::json::parse(report.to_json()).contains("driver_start"));

  BenchReport cpu;
  cpu.rows = {bench_row("fleet", 2, {300}, "fleet (1 device)"), bench_row("fleet (1 device)", 1, {200})};
  cpu.rows[0].median_report = start_on_gpus({}, 300);
  cpu.rows[1].median_report = start_on_gpus({}, 200);
  conclude_bench(cpu, 2, "2 CPU sessions");
  EXPECT_FALSE(cpu.driver_start.measured());
  for (const auto& n : cpu.notes) EXPECT_EQ(n.find("driver"), std::string::npos) << n;
}

// A fresh machine's bench runs no anchors, and says how to get them: the pip line for the interpreter
// it tried, pinned to the ONNX Runtime ortfleet loaded, or another interpreter.
TEST(Bench, AnInterpreterWithoutOnnxruntimeIsToldHowToGetIt) {
  const fs::path fake = test::fresh_dir("bench-no-onnxruntime") / "python3";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'onnxruntime'\" >&2\nexit 1\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  const auto problem = detail::anchor_problem(fake.string());
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find(fake.string() + " cannot import onnxruntime and numpy"), std::string::npos) << *problem;
  EXPECT_NE(problem->find(fake.string() + " -m pip install onnxruntime"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("onnxruntime-gpu"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("--python"), std::string::npos) << *problem;
}

}  // namespace ortfleet
