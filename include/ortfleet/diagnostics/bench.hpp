#pragma once
// `ortfleet bench`: each start-up strategy timed in fresh processes, side by side with what users run
// today (the onnxruntime Python package: sequential, threads, a spawn pool), hyperfine-style: an
// untimed start first (page cache, the model cache's entry), then N rounds, mean ± σ and the range,
// ratios with their ±, and a verdict that calls a difference within noise what it is and says what
// made a gain (bench_verdict). One statistic throughout: the mean of a row's rounds. Its table, its
// ratio columns, its verdict, its notes, its JSON, its Markdown and the report page all use it, so
// every ratio bench prints recomputes from the means of the table it stands under.
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ortfleet/base/settings.hpp"
#include "ortfleet/diagnostics/driver_start.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/start_record.hpp"
#include "ortfleet/fleet/start_report.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

/// What the seconds a bench or a tune may take (BenchOptions::budget_s, TuneOptions::budget_s) take:
/// 0 (no limit) up to a week. The one check of --budget and of Python's budget=.
inline constexpr ValueRule kRoundsBudgetRule{.kind = ValueKind::number, .lo = 0, .hi = kWeekS, .unit = "seconds"};

struct BenchOptions {
  /// What runs and warmup_rounds take: the one check of the command line's --runs and --warmup and of
  /// Python's runs= and warmup= (each front end names its own word; ortfleet/base/settings.hpp's
  /// number_problem says what is wrong).
  static constexpr ValueRule kRunsRule{.kind = ValueKind::whole, .lo = 1, .hi = 1000};
  static constexpr ValueRule kWarmupRoundsRule{.kind = ValueKind::whole, .lo = 0, .hi = 100};

  std::string model;
  std::vector<Device> devices;               ///< the full set (N devices)
  std::vector<Strategy> strategies = all_strategies();
  /// Timed rounds. Five: on the shared GPU machines a row's rounds spread by 5-10%, and the ratio of
  /// N devices to one is read from each round's pair (BenchRow::ratio_per_round), so that 1.1x shows
  /// apart from the noise.
  int runs = 5;
  int warmup_rounds = 1;                     ///< untimed rounds first
  bool anchors = true;                       ///< also time the onnxruntime Python package
  bool python_ortfleet = false;              ///< and ortfleet's Python API (set when `import ortfleet` works)
  /// Also time starts on a warm worker pool (a pool server this bench starts first): a new model on
  /// the warm pool, and the same model again (resident). Their figures need that pool up: they are
  /// reported beside the cold rows, never as the fastest cold start.
  bool pool_rows = true;
  /// Also time the next job on a node: a first job that leaves a warm pool, the next job right after
  /// it, and (GPUs whose workers park) a job on the parked pool with the model resident and one after
  /// `pool evict`; at most 3 timed rounds, each a node of its own (runtime folder, cache, pool).
  bool next_job_rows = true;
  std::string python = "python3";
  std::string ortfleet_executable;           ///< the `ortfleet` binary for child runs (default: next to this one)
  std::string ort_library;
  RunConfig config;                          ///< every child start's (as a config file), and the Python anchors' conv algo
  double timeout_s = 3600;
  /// The floor of one device's cold start on this machine (ProfileReport::floor_ms, from `profile`);
  /// when set, each 1-device row reports its median over it. 0: none.
  double floor_ms = 0;
  std::function<void(const std::string&)> progress;  ///< one status line at a time
  /// Lines worth keeping, said as they come (the plan, how long it will take, rounds cut to the
  /// budget); nothing when unset.
  std::function<void(const std::string&)> notice;
  /// Seconds the whole bench may take (0: no limit). Once the first timed round shows what a round
  /// costs, the timed rounds are cut to fit (at least two, so that a spread is known), a Python anchor
  /// that would take more than a quarter of it is stopped, and no round starts past it.
  double budget_s = 0;
  /// Ends the bench when requested (Ctrl-C in Python): the start under way is stopped in order (its
  /// process group gets SIGTERM), what the bench set up is taken down, and run_bench throws.
  std::stop_token stop;
  /// Save the means of a bench of several GPUs as this machine's start record, which
  /// Strategy::automatic chooses from (ortfleet/fleet/start_record.hpp).
  bool save_record = true;
};

struct BenchRow {
  std::string label;        ///< "fleet", "threads", "python threads", "fleet (1 device)"
  std::string family;       ///< "ortfleet" or "onnxruntime-python"
  std::string strategy;
  int device_count = 0;
  std::vector<double> wall_ms;  ///< per timed round: exec until every device is ready
  double min_ms = 0;
  double median_ms = 0;
  double max_ms = 0;
  double mean_ms = 0;       ///< mean of wall_ms
  double sigma_ms = 0;      ///< their sample standard deviation (0 below two rounds)
  std::string baseline;     ///< the 1-device row this one is compared with
  double ratio_to_one = 0;  ///< mean / baseline mean (1.0 = as fast as starting one device)
  /// This row's round i over its baseline's round i (rows run round-robin, so the two of a round met
  /// the same machine): the spread of ratio_to_one.
  std::vector<double> ratio_per_round;
  double efficiency = 0;    ///< baseline mean / mean
  double floor_ratio = 0;   ///< mean / the floor of a 1-device start (1-device rows, when the floor is known)
  std::vector<double> process_start_ms;  ///< per timed round: exec until main() (the Python interpreter, for Python rows)
  std::string error;        ///< why a round failed
  StartReport median_report;  ///< the round at the median, with its timeline (the row's representative round)
  /// "" for a cold start; "warm pool" (the pool's workers were up, the session new) or "resident"
  /// (the pool held the session already).
  std::string warm;
  /// The model cache the row starts with: "" (the bench's cache, filled by the untimed round), "empty"
  /// (a fresh, empty cache each round: a model's first start) or "off" (--no-model-cache).
  std::string model_cache;
  bool ok() const { return error.empty() && !wall_ms.empty(); }
};

/// One cold start set against the fastest, hyperfine's way.
struct BenchComparison {
  std::string row;            ///< the row set against the fastest
  double ratio = 0;           ///< its mean over the fastest's: 1.3 = it takes 1.3 times as long
  double sigma = 0;           ///< the ratio's ± (0 when the noise is not known: fewer than two rounds)
  bool noise_known = false;
  bool within_noise = false;  ///< their ranges overlap, or the ± reaches 1
  /// What made the fastest's gain when the two differ in more than the strategy: "model cache" when
  /// without its cache the fleet is within noise of this row; "" otherwise.
  std::string gain_from;
};

/// The verdict on the cold starts of every device: the fastest, each other row against it, and what
/// made a gain.
struct BenchVerdict {
  std::string fastest;   ///< the row of the lowest mean ("" when none ran)
  /// "fastest start-up of 2 GPUs: fleet, 412 ± 12 ms (5 rounds)", or that none is faster beyond noise.
  std::string headline;
  std::vector<std::string> lines;  ///< one per other row: "1.31 ± 0.12x faster than sequential (540 ± 15 ms)", "within noise of ..."
  std::vector<BenchComparison> comparisons;
};
/// The verdict on the cold starts of `device_count` devices among `rows` (other device counts, warm
/// rows and the cache's other states left out; the fleet without its cache is read to say what made
/// the fleet's gain). `devices` names them in the headline ("2 GPUs").
BenchVerdict bench_verdict(const std::vector<BenchRow>& rows, int device_count, const std::string& devices);

struct BenchReport {
  std::string model;
  std::string machine;      ///< "4 x NVIDIA H200, 64 CPUs" or "CPU only, 2 CPUs"
  std::string ort_version;
  std::vector<BenchRow> rows;
  std::vector<std::string> skipped;   ///< what was not run and why (e.g. no onnxruntime in Python)
  double floor_ms = 0;                ///< the floor of a 1-device start (0: not measured)
  std::string fastest;                ///< label of the fastest N-device row (BenchVerdict::fastest)
  std::string verdict;                ///< BenchVerdict::headline
  std::vector<std::string> comparisons;  ///< BenchVerdict::lines: "1.31 ± 0.12x faster than sequential (...)"
  std::vector<BenchComparison> comparison_ratios;  ///< the same as numbers
  int runs = 0;                       ///< timed rounds run (fewer than asked when the budget cut them)
  int untimed_starts = 0;             ///< untimed starts before them
  std::vector<std::string> notes;        ///< what a row's figure includes, e.g. the Python interpreter's start
  /// The driver's start (cuInit and contexts per worker) in the representative round of the fleet on
  /// every device; measured only on more than one GPU.
  DriverStart driver_start;
  std::string to_json() const;  ///< the record; the HTML report (ortfleet report) draws from it
  std::string to_markdown() const;
};

/// The bench table as its printers draw it (the CLI's text table, Markdown): the columns ("vs floor"
/// only when the floor is known) and each row's cells. A new format is one more printer of this.
struct BenchTable {
  struct Row {
    std::vector<std::string> cells;  ///< one per column; a failed row: its label, its devices, "failed"
    std::string error;               ///< why it failed
    bool failed = false;
  };
  std::vector<std::string> columns;
  std::vector<Row> rows;
};
/// `report`'s table, its times as duration_text writes them ("850 ms", "1.23 s").
BenchTable bench_table(const BenchReport& report);

BenchReport run_bench(const BenchOptions& options);

/// What a bench concludes from its rows' timed rounds (run_bench calls it once they have run; exposed
/// for tests): each row's statistics, its ratio to its 1-device baseline and to `report.floor_ms`,
/// the verdict on the cold starts of `device_count` devices (named `devices` in the headline: "2
/// GPUs"), the notes that set rows against each other, and the driver's share on more than one GPU.
void conclude_bench(BenchReport& report, int device_count, const std::string& devices);

/// The start record of a bench on `devices` (two GPUs or more): the mean of every cold ortfleet row
/// that brought up all of them, on a machine with these `gpus`; nothing for CPU devices, one device or
/// no such row.
std::optional<StartRecord> start_record_of(const BenchReport& report, const std::vector<Device>& devices, const std::vector<std::string>& gpus);

/// "fleet from Python: 52 ms of its 651 ms went to starting the Python interpreter...": the fleet from
/// Python against the command line's fleet, without the interpreter's start, which a Python job has
/// paid long before it imports ortfleet. Nothing when either row is missing or failed.
std::optional<std::string> python_fleet_note(const std::vector<BenchRow>& rows);

}  // namespace ortfleet
