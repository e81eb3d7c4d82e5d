#include "ortfleet/diagnostics/bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "diagnostics/cold_start.hpp"
#include "diagnostics/machine.hpp"
#include "diagnostics/next_job_bench.hpp"
#include "diagnostics/python_anchor.hpp"
#include "process/child_process.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "diagnostics/statistics.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "base/system_paths.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Case {
  BenchRow row;
  detail::ColdStartRequest start;
  bool evict_first = false;  // a warm-pool row: the pool drops its sessions first, so this start makes new ones
};

/// The pool server the warm-pool rows start on: up before the first round, in a private folder.
struct BenchPool {
  detail::PrivateDir folder = detail::PrivateDir::temporary("ortfleet-bench-pool");
  std::unique_ptr<PoolServer> server;
  std::thread serving;
  double start_ms = 0;
  BenchPool(const BenchOptions& o) {
    ServeOptions serve;
    serve.pool.devices = o.devices;
    serve.pool.ort_library = o.ort_library;
    serve.pool.config = o.config;
    serve.socket_path = (folder.path() / "pool.sock").string();
    const int64_t begin = monotonic_ns();
    server = std::make_unique<PoolServer>(serve);
    serving = std::thread([this] { server->serve(); });
    if (!server->pool().wait(o.timeout_s)) {
      std::string why;
      for (const auto& w : server->pool().status()) {
        if (!w.error.empty()) why = w.error;
      }
      stop();
      throw Error("the warm pool did not start: " + why);
    }
    start_ms = static_cast<double>(monotonic_ns() - begin) / 1e6;
  }
  ~BenchPool() { stop(); }
  void stop() {
    if (!server) return;
    server->stop();
    if (serving.joinable()) serving.join();
    server.reset();
  }
};

std::string count_label(const std::vector<Device>& devices) {
  const bool gpu = !devices.empty() && devices.front().is_gpu();
  return fmt::format("{} {}{}", devices.size(), gpu ? "GPU" : "CPU session", devices.size() == 1 ? "" : "s");
}

std::vector<Case> plan_cases(const BenchOptions& o, const std::string& ortfleet, const std::optional<std::string>& anchor,
                             const std::string& pool_socket) {
  auto request = [&](const std::vector<Device>& devices) {
    detail::ColdStartRequest r;
    r.model = o.model;
    r.devices = devices;
    r.ortfleet_executable = ortfleet;
    r.ort_library = o.ort_library;
    r.config = o.config;
    r.timeout_s = o.timeout_s;
    return r;
  };
  std::vector<Case> cases;
  const auto& all = o.devices;
  const std::vector<Device> one = {all.front()};
  const bool multi = all.size() > 1;
  auto ortfleet_case = [&](Strategy s, const std::vector<Device>& devices, std::string label) {
    Case c;
    c.row.label = std::move(label);
    c.row.family = "ortfleet";
    c.row.strategy = to_string(s);
    c.row.device_count = static_cast<int>(devices.size());
    c.start = request(devices);
    c.start.strategy = to_string(s);
    cases.push_back(std::move(c));
  };
  auto python_case = [&](const std::string& mode, const std::vector<Device>& devices, std::string label) {
    Case c;
    c.row.label = std::move(label);
    // ortfleet's own fleet, started from Python, is ortfleet's (drawn as such); the rest are what users run today.
    c.row.family = mode == "ortfleet" ? "ortfleet-python" : "onnxruntime-python";
    c.row.strategy = "python-" + mode;
    c.row.device_count = static_cast<int>(devices.size());
    c.start = request(devices);
    c.start.command = {o.python, *anchor, o.model, "--devices", to_string(devices), "--mode", mode,
                       "--conv-algo", to_string(o.config.cuda.conv_algo_search)};
    if (devices.front().is_gpu()) {
      if (auto ep = find_cuda_ep()) c.start.command.insert(c.start.command.end(), {"--cuda-ep", ep->path});
    }
    cases.push_back(std::move(c));
  };
  if (anchor && o.python_ortfleet) python_case("ortfleet", all, "fleet from Python");
  if (anchor) {
    python_case("sequential", all, "python sequential");
    if (multi) {
      python_case("threads", all, "python threads");
      python_case("spawn", all, "python spawn pool");
      python_case("sequential", one, "python (1 device)");
    }
  }
  for (Strategy s : o.strategies) ortfleet_case(s, all, to_string(s));
  if (std::find(o.strategies.begin(), o.strategies.end(), Strategy::fleet) != o.strategies.end()) {
    // The cached fleet row's two counterparts: a model's first start (what a new user sees first) and
    // the start without the cache. The first start's cache is thrown away after each round, so it
    // makes no entry (--model-cache-fill off): a real one makes it after ready, off the timed path.
    ortfleet_case(Strategy::fleet, all, "fleet, first start (empty cache)");
    cases.back().row.model_cache = "empty";
    cases.back().start.arguments.insert(cases.back().start.arguments.end(), {"--model-cache", "--model-cache-fill", "off"});
    ortfleet_case(Strategy::fleet, all, "fleet, no model cache");
    cases.back().row.model_cache = "off";
    cases.back().start.arguments.push_back("--no-model-cache");
  }
  if (multi) {
    ortfleet_case(Strategy::sequential, one, "plain (1 device)");
    ortfleet_case(Strategy::fleet, one, "fleet (1 device)");
  }
  const auto gpus = std::count_if(all.begin(), all.end(), [](const Device& d) { return d.is_gpu(); });
  if (gpus > 1) {
    // The fleet's workers as before narrowing: each cuInit sets up every GPU of the node.
    ortfleet_case(Strategy::fleet, all, "fleet, workers see every GPU");
    cases.back().start.arguments.push_back("--no-narrow-workers");
    // What auto weighs the workers against (this machine's start record): every GPU in one process.
    ortfleet_case(Strategy::fleet, all, "fleet, one process");
    cases.back().start.arguments.push_back("--one-process");
  }
  if (!pool_socket.empty()) {
    // Each warm-pool row is followed by its resident row: the session it made is the one found again.
    auto pool_case = [&](const std::vector<Device>& devices, const std::string& label, bool resident) {
      ortfleet_case(Strategy::fleet, devices, label);
      cases.back().row.warm = resident ? "resident" : "warm pool";
      cases.back().evict_first = !resident;
      cases.back().start.arguments.insert(cases.back().start.arguments.end(), {"--pool", pool_socket});
    };
    pool_case(all, "fleet on a warm pool", false);
    pool_case(all, "fleet, resident", true);
    if (multi) {
      pool_case(one, "fleet on a warm pool (1 device)", false);
      pool_case(one, "fleet, resident (1 device)", true);
    }
  }
  // Each multi-device row is compared with starting one device the same way.
  for (auto& c : cases) {
    if (!multi || c.row.device_count == 1 || !c.row.model_cache.empty()) continue;
    c.row.baseline = c.row.warm == "warm pool"                ? "fleet on a warm pool (1 device)"
                     : c.row.warm == "resident"             ? "fleet, resident (1 device)"
                     : c.row.strategy == "python-ortfleet"  ? "fleet (1 device)"
                     : c.row.family == "onnxruntime-python" ? "python (1 device)"
                     : c.row.strategy == "fleet"            ? "fleet (1 device)"
                                                            : "plain (1 device)";
  }
  return cases;
}

/// Exec until main() in one start: the dynamic loader, or for a Python row the interpreter's start.
double process_start_ms(const StartReport& report) {
  for (const auto& e : report.timeline.events()) {
    if (e.name == phase::process_start && e.lane == "process") return e.duration_ms();
  }
  return 0;
}

json row_json(const BenchRow& r) {
  json j = {{"label", r.label},         {"family", r.family},           {"strategy", r.strategy},
            {"devices", r.device_count}, {"wall_ms", r.wall_ms},         {"min_ms", r.min_ms},
            {"median_ms", r.median_ms},  {"max_ms", r.max_ms},           {"baseline", r.baseline},
            {"ratio_to_one_device", r.ratio_to_one}, {"efficiency", r.efficiency}, {"floor_ratio", r.floor_ratio}, {"error", r.error},
            {"process_start_ms", r.process_start_ms}, {"warm", r.warm}, {"model_cache", r.model_cache},
            {"ratio_per_round", r.ratio_per_round}};
  if (r.ok()) j["median_run"] = json::parse(r.median_report.to_json());
  return j;
}

const BenchRow* find_row(const std::vector<BenchRow>& rows, const std::string& label) {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const BenchRow& r) { return r.label == label && r.ok(); });
  return it == rows.end() ? nullptr : &*it;
}

/// What the warm rows and narrowing bought, each against its cold counterpart in the same run.
std::vector<std::string> warm_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  const BenchRow* cold = find_row(rows, "fleet");
  if (const BenchRow* wide = find_row(rows, "fleet, workers see every GPU"); wide && cold) {
    notes.push_back(fmt::format("narrowed workers: the fleet is ready {:.0f} ms sooner ({:.0f} ms) than with every worker seeing every GPU "
                                "({:.0f} ms)",
                                wide->median_ms - cold->median_ms, cold->median_ms, wide->median_ms));
  }
  if (const BenchRow* warm = find_row(rows, "fleet on a warm pool"); warm && cold) {
    notes.push_back(fmt::format("on a warm pool (new session, pool already up) the fleet is ready in {:.2f}x the cold fleet's time "
                                "({:.0f} ms vs {:.0f} ms){}",
                                warm->median_ms / cold->median_ms, warm->median_ms, cold->median_ms,
                                warm->ratio_to_one > 0 ? fmt::format("; {:.2f}x its 1-device start on the same pool", warm->ratio_to_one) : ""));
  }
  if (const BenchRow* resident = find_row(rows, "fleet, resident")) {
    notes.push_back(fmt::format("resident (the pool held the session already): every device ready {:.0f} ms after the client's exec",
                                resident->median_ms));
  }
  return notes;
}

/// The fleet's start in the three cache states a user meets, side by side: the model's first start
/// (an empty cache), the cached start, the start without the cache.
std::vector<std::string> cache_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  const BenchRow* cached = find_row(rows, "fleet");
  const BenchRow* plain = find_row(rows, "fleet, no model cache");
  const BenchRow* first = find_row(rows, "fleet, first start (empty cache)");
  if (!plain) return notes;
  if (first) {
    notes.push_back(fmt::format("first start on an empty cache: {:.2f}x the start without the cache ({:.0f} ms vs {:.0f} ms); its cache "
                                "entry is made after ready, in the background, and is not part of it",
                                first->median_ms / plain->median_ms, first->median_ms, plain->median_ms));
  }
  if (cached) {
    notes.push_back(fmt::format("cached start: {:.2f}x the start without the cache ({:.0f} ms vs {:.0f} ms; the untimed round made the entry)",
                                cached->median_ms / plain->median_ms, cached->median_ms, plain->median_ms));
  }
  return notes;
}

/// How far each multi-device row's ratio to one device moved over the rounds (a round's own pair).
std::vector<std::string> ratio_spread_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  for (const auto& r : rows) {
    if (!r.ok() || r.ratio_per_round.size() < 2) continue;
    const Summary s = summarize(r.ratio_per_round);
    notes.push_back(fmt::format("{} on {} devices / 1 device: {:.2f}x (median of {} rounds' own ratios; {:.2f}x to {:.2f}x)", r.label,
                                r.device_count, s.median, r.ratio_per_round.size(), s.min, s.max));
  }
  return notes;
}

/// The onnxruntime Python anchor script, when `o.python` can run it (and whether it can import ortfleet
/// too: then the fleet from Python is timed); what is not run goes into `report.skipped`.
std::optional<std::string> find_anchors(BenchOptions& o, BenchReport& report) {
  if (!o.anchors) {
    report.skipped.push_back("onnxruntime Python anchors: turned off (--no-anchors)");
    return std::nullopt;
  }
  std::optional<std::string> anchor = detail::find_anchor_script();
  if (!anchor) {
    report.skipped.push_back("onnxruntime Python anchors: bench/anchors/onnxruntime_python.py not found (set ORTFLEET_PYTHON_ANCHOR)");
    return std::nullopt;
  }
  if (o.progress) o.progress("checking that " + o.python + " can import onnxruntime");
  if (const auto problem = detail::anchor_problem(o.python)) {
    report.skipped.push_back("onnxruntime Python anchors: " + *problem);
    return std::nullopt;
  }
  if (detail::run_child({o.python, "-c", "import ortfleet"}, {}, "", 60).exit_code == 0) {
    o.python_ortfleet = true;  // ortfleet's Python module is importable: time the fleet from Python too
  } else {
    report.skipped.push_back("fleet from Python: " + o.python + " cannot import ortfleet (pip install . first)");
  }
  return anchor;
}

/// Every case once per round, round-robin, so that slow drifts of the machine touch all alike; the
/// timed rounds' wall times into each case's row, the round nearest the median as its report.
void run_rounds(const BenchOptions& o, std::vector<Case>& cases, BenchPool* pool) {
  const int rounds = o.warmup_rounds + o.runs;
  for (int round = 0; round < rounds; ++round) {
    const bool timed = round >= o.warmup_rounds;
    for (auto& c : cases) {
      if (!c.row.error.empty()) continue;
      if (o.progress) {
        o.progress(fmt::format("{} {}/{}: {} on {}", timed ? "round" : "untimed round", timed ? round - o.warmup_rounds + 1 : round + 1,
                               timed ? o.runs : o.warmup_rounds, c.row.label,
                               count_label(std::vector<Device>(o.devices.begin(), o.devices.begin() + c.row.device_count))));
      }
      if (c.evict_first) pool_evict(pool->server->socket_path());
      std::optional<detail::PrivateDir> empty_cache;  // a first start's: fresh each round, gone after it
      if (c.row.model_cache == "empty") {
        empty_cache = detail::PrivateDir::temporary("ortfleet-bench-first-start");
        c.start.environment["ORTFLEET_CACHE"] = empty_cache->path().string();
      }
      const detail::ColdStart result = detail::run_cold_start(c.start);
      if (!result.ok()) {
        const bool anchor_on_gpu = c.row.family == "onnxruntime-python" && o.devices.front().is_gpu();
        c.row.error = anchor_on_gpu ? detail::explain_anchor_failure(result.error, o.python) : result.error;
        continue;
      }
      const StartReport& start = *result.report;
      if (!timed) continue;
      c.row.wall_ms.push_back(start.wall_ms());
      c.row.process_start_ms.push_back(process_start_ms(start));
      const Summary s = summarize(c.row.wall_ms);
      if (c.row.wall_ms.size() == 1 || std::abs(start.wall_ms() - s.median) <= std::abs(c.row.median_report.wall_ms() - s.median)) {
        c.row.median_report = start;
      }
    }
  }
}

}  // namespace

std::optional<std::string> python_fleet_note(const std::vector<BenchRow>& rows) {
  const auto from_python = std::find_if(rows.begin(), rows.end(), [](const BenchRow& r) { return r.strategy == "python-ortfleet" && r.ok(); });
  if (from_python == rows.end()) return std::nullopt;
  const auto cli = std::find_if(rows.begin(), rows.end(), [&](const BenchRow& r) {
    return r.family == "ortfleet" && r.strategy == "fleet" && r.device_count == from_python->device_count && r.ok();
  });
  if (cli == rows.end()) return std::nullopt;
  const double interpreter = summarize(from_python->process_start_ms).median;
  const double after = from_python->median_ms - interpreter;
  return fmt::format("fleet from Python: {:.0f} ms of its {:.0f} ms went to starting the Python interpreter, before `import ortfleet`; "
                     "from there to ready: {:.0f} ms, {:.2f}x the command line's fleet ({:.0f} ms)",
                     interpreter, from_python->median_ms, after, after / cli->median_ms, cli->median_ms);
}

BenchReport run_bench(const BenchOptions& options) {
  BenchOptions o = options;
  if (o.devices.empty()) o.devices = select_devices("all").devices;
  if (o.runs < 1) throw Error("bench needs at least one timed run", "Use --runs 1 or more");
  validate_model_file(o.model);
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };

  const std::string ortfleet = detail::ortfleet_executable(o.ortfleet_executable);
  load_runtime(o.ort_library);  // for the report, and to find the CUDA EP next to it for the anchors
  BenchReport report;
  report.model = o.model;
  report.floor_ms = o.floor_ms;
  report.machine = detail::machine_description(o.devices);
  if (const RuntimeInfo* rt = loaded_runtime()) report.ort_version = rt->version;

  const std::optional<std::string> anchor = find_anchors(o, report);
  std::unique_ptr<BenchPool> pool;
  if (o.pool_rows) {
    say("starting a warm worker pool for the pool rows");
    try {
      pool = std::make_unique<BenchPool>(o);
    } catch (const std::exception& e) {
      report.skipped.push_back("fleet on a warm pool, resident: " + Error::from(e).what_failed());
    }
  } else {
    report.skipped.push_back("fleet on a warm pool, resident: turned off (--no-pool)");
  }
  std::vector<Case> cases = plan_cases(o, ortfleet, anchor, pool ? pool->server->socket_path() : std::string());
  run_rounds(o, cases, pool.get());
  detail::NextJobRows next_job;
  if (o.next_job_rows) {
    next_job = detail::run_next_job_rows(o, ortfleet, std::min(o.runs, 3));
  } else {
    report.skipped.push_back("the next job's rows: turned off (--no-next-job)");
  }
  std::map<std::string, double> medians;
  for (auto& c : cases) {
    const Summary s = summarize(c.row.wall_ms);
    c.row.min_ms = s.min;
    c.row.median_ms = s.median;
    c.row.max_ms = s.max;
    if (c.row.ok()) medians[c.row.label] = s.median;
  }
  for (auto& c : cases) {
    auto base = medians.find(c.row.baseline);
    if (c.row.ok() && base != medians.end()) {
      c.row.ratio_to_one = c.row.median_ms / base->second;
      c.row.efficiency = base->second / c.row.median_ms;
      const auto baseline = std::find_if(cases.begin(), cases.end(), [&](const Case& b) { return b.row.label == c.row.baseline; });
      for (size_t i = 0; i < std::min(c.row.wall_ms.size(), baseline->row.wall_ms.size()); ++i) {
        c.row.ratio_per_round.push_back(c.row.wall_ms[i] / baseline->row.wall_ms[i]);
      }
    }
    if (c.row.ok() && c.row.warm.empty() && o.floor_ms > 0 && c.row.device_count == 1) c.row.floor_ratio = c.row.median_ms / o.floor_ms;
    report.rows.push_back(c.row);
  }
  for (auto& r : next_job.rows) report.rows.push_back(std::move(r));
  for (auto& s : next_job.skipped) report.skipped.push_back(std::move(s));
  // The fastest way to bring up all N devices, and how it compares with each alternative.
  const BenchRow* fastest = nullptr;
  for (const auto& r : report.rows) {
    // The cache's other states are the fleet's own variants, compared in their notes.
    if (r.ok() && r.warm.empty() && r.model_cache.empty() && r.device_count == static_cast<int>(o.devices.size()) &&
        (!fastest || r.median_ms < fastest->median_ms)) {
      fastest = &r;
    }
  }
  if (fastest != nullptr) {
    report.fastest = fastest->label;
    for (const auto& r : report.rows) {
      if (&r == fastest || !r.ok() || !r.warm.empty() || !r.model_cache.empty() || r.device_count != fastest->device_count) continue;
      report.comparisons.push_back(fmt::format("{} is {:.2f}x faster than {}", fastest->label, r.median_ms / fastest->median_ms, r.label));
    }
  }
  if (auto note = python_fleet_note(report.rows)) report.notes.push_back(*note);
  for (auto& note : warm_notes(report.rows)) report.notes.push_back(std::move(note));
  for (auto& note : cache_notes(report.rows)) report.notes.push_back(std::move(note));
  for (auto& note : ratio_spread_notes(report.rows)) report.notes.push_back(std::move(note));
  for (auto& note : detail::next_job_notes(report.rows)) report.notes.push_back(std::move(note));
  if (o.save_record) {
    if (const auto record = start_record_of(report, o.devices, machine_gpu_names())) {
      try {
        save_start_record(*record);
        report.notes.push_back("saved these starts as this machine's start record " + start_record_path(record->device_count) +
                               ": `auto` chooses a worker process per GPU or one process from it");
      } catch (const std::exception& e) {
        report.notes.push_back("could not save this machine's start record: " + Error::from(e).what_failed());
      }
    }
  }
  if (pool) {
    report.notes.push_back(fmt::format("the warm pool itself took {:.0f} ms to start ({}), once, before these rows: paid by "
                                       "`ortfleet serve` or ortfleet.prewarm() while a job does other work",
                                       pool->start_ms, count_label(o.devices)));
  }
  return report;
}

std::optional<StartRecord> start_record_of(const BenchReport& report, const std::vector<Device>& devices, const std::vector<std::string>& gpus) {
  const bool all_gpus = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_gpu(); });
  if (devices.size() < 2 || !all_gpus) return std::nullopt;
  StartRecord record;
  record.gpus = gpus;
  record.device_count = static_cast<int>(devices.size());
  record.measured_at = utc_now();
  record.model = report.model;
  for (const auto& r : report.rows) {
    if (r.ok() && r.family == "ortfleet" && r.warm.empty() && r.device_count == record.device_count) record.start_ms[r.label] = r.median_ms;
  }
  if (record.start_ms.empty()) return std::nullopt;
  return record;
}

std::string BenchReport::to_json() const {
  json rows_json = json::array();
  for (const auto& r : rows) rows_json.push_back(row_json(r));
  return json{{"ortfleet_bench", 1}, {"model", model}, {"machine", machine}, {"onnxruntime", ort_version},
              {"floor_ms", floor_ms}, {"rows", rows_json}, {"skipped", skipped}, {"fastest", fastest}, {"comparisons", comparisons}, {"notes", notes}}
      .dump(2);
}

BenchTable bench_table(const BenchReport& report, const std::function<std::string(double)>& format_ms) {
  BenchTable table;
  const bool floor = report.floor_ms > 0;
  table.columns = {"start-up", "devices", "min", "median", "max", "vs 1 device", "efficiency"};
  if (floor) table.columns.emplace_back("vs floor");
  for (const auto& r : report.rows) {
    BenchTable::Row row;
    row.failed = !r.ok();
    row.error = r.error;
    row.cells = {r.label, std::to_string(r.device_count)};
    if (row.failed) {
      row.cells.emplace_back("failed");
    } else {
      row.cells.insert(row.cells.end(), {format_ms(r.min_ms), format_ms(r.median_ms), format_ms(r.max_ms),
                                         r.ratio_to_one > 0 ? fmt::format("{:.2f}x", r.ratio_to_one) : "",
                                         r.efficiency > 0 ? fmt::format("{:.0f}%", r.efficiency * 100) : ""});
      if (floor) row.cells.push_back(r.floor_ratio > 0 ? fmt::format("{:.2f}x", r.floor_ratio) : "");
    }
    row.cells.resize(table.columns.size());
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string BenchReport::to_markdown() const {
  std::string out = fmt::format("Model `{}` on {} (ONNX Runtime {}): wall time from exec until every session is created and has run one inference.\n\n",
                                fs::path(model).filename().string(), machine, ort_version);
  const BenchTable table = bench_table(*this, [](double ms) { return fmt::format("{:.2f} s", ms / 1e3); });
  auto line = [](const std::vector<std::string>& cells) {
    std::string text = "|";
    for (const auto& c : cells) text += " " + c + " |";
    return text + "\n";
  };
  out += line(table.columns) + "|---|";
  for (size_t i = 1; i < table.columns.size(); ++i) out += "---:|";
  out += "\n";
  for (const auto& row : table.rows) {
    auto cells = row.cells;
    if (row.failed) cells[2] = "failed: " + row.error;
    out += line(cells);
  }
  for (const auto& c : comparisons) out += "\n- " + c;
  for (const auto& n : notes) out += "\n- " + n;
  for (const auto& s : skipped) out += "\n- not run: " + s;
  return out + "\n";
}

}  // namespace ortfleet
