#include "ortfleet/diagnostics/bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "diagnostics/bench_rows.hpp"
#include "diagnostics/cold_start.hpp"
#include "diagnostics/machine.hpp"
#include "diagnostics/next_job_bench.hpp"
#include "diagnostics/python_anchor.hpp"
#include "diagnostics/round_budget.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "process/child_process.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/base/error.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
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
  const bool gpu = !devices.empty() && detail::device_has(devices.front(), detail::Capability::device_memory);
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
    r.stop = o.stop;
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
    // An anchor is what users run today, set beside ortfleet's rows: within a budget it gets at most a
    // quarter of it (a large model's sequential anchor on many GPUs can take minutes a start).
    if (o.budget_s > 0) c.start.timeout_s = std::min(c.start.timeout_s, o.budget_s / 4);
    c.start.command = {o.python, *anchor, o.model, "--devices", to_string(devices), "--mode", mode,
                       "--conv-algo", to_string(o.config.cuda.conv_algo_search)};
    if (devices.front().is_cuda()) {
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
    ortfleet_case(Strategy::fleet, all, "fleet, empty cache");
    cases.back().row.model_cache = "empty";
    cases.back().start.arguments.insert(cases.back().start.arguments.end(), {"--model-cache", "--model-cache-fill", "off"});
    ortfleet_case(Strategy::fleet, all, "fleet, no model cache");
    cases.back().row.model_cache = "off";
    cases.back().start.arguments.push_back("--no-model-cache");
    // A first start this model gets tiered (its first outputs from a quick session): the same start
    // with the session as configured from the outset beside it.
    if (tiered_start_asked(o.model, all.front(), o.config)) {
      ortfleet_case(Strategy::fleet, all, "fleet, empty cache, not tiered");
      cases.back().row.model_cache = "empty";
      cases.back().start.arguments.insert(cases.back().start.arguments.end(),
                                          {"--model-cache", "--model-cache-fill", "off", "--tiered-start", "off"});
    }
  }
  if (multi) {
    ortfleet_case(Strategy::sequential, one, "plain (1 device)");
    ortfleet_case(Strategy::fleet, one, "fleet (1 device)");
  }
  const auto gpus = std::count_if(all.begin(), all.end(), [](const Device& d) { return detail::device_has(d, detail::Capability::device_memory); });
  if (gpus > 1) {
    // The fleet's workers as before narrowing: each cuInit sets up every GPU of the node.
    ortfleet_case(Strategy::fleet, all, "fleet, workers see every GPU");
    cases.back().start.arguments.push_back("--no-narrow-workers");
  }
  if (gpus >= 1) {
    // What auto weighs the workers against (this machine's start record): every GPU in this process
    // (on one GPU: in this process, where cuDNN's recorded choices do not apply, against a worker).
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
    pool_case(all, "fleet, warm pool", false);
    pool_case(all, "fleet, resident", true);
    if (multi) {
      pool_case(one, "fleet, warm pool (1 device)", false);
      pool_case(one, "fleet, resident (1 device)", true);
    }
  }
  // Each multi-device row is compared with starting one device the same way.
  for (auto& c : cases) {
    if (!multi || c.row.device_count == 1 || !c.row.model_cache.empty()) continue;
    c.row.baseline = c.row.warm == "warm pool"                ? "fleet, warm pool (1 device)"
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
            {"ratio_per_round", r.ratio_per_round}, {"mean_ms", r.mean_ms}, {"sigma_ms", r.sigma_ms}};
  if (r.ok()) j["median_run"] = json::parse(r.median_report.to_json());
  return j;
}

using detail::ran_row;

/// What the warm rows and narrowing bought, each against its cold counterpart in the same run.
std::vector<std::string> warm_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  const BenchRow* cold = ran_row(rows, "fleet");
  if (const BenchRow* wide = ran_row(rows, "fleet, workers see every GPU"); wide && cold) {
    const double sooner_ms = wide->mean_ms - cold->mean_ms;
    notes.push_back(fmt::format("narrowed workers: the fleet is ready {} {} ({}) than with every worker seeing every GPU ({})",
                                duration_text(std::fabs(sooner_ms)), sooner_ms >= 0 ? "sooner" : "later", duration_text(cold->mean_ms),
                                duration_text(wide->mean_ms)));
  }
  if (const BenchRow* warm = ran_row(rows, "fleet, warm pool"); warm && cold) {
    notes.push_back(fmt::format("on a warm pool (new session, pool already up) the fleet is ready in {:.2f}x the cold fleet's time "
                                "({} vs {}){}",
                                warm->mean_ms / cold->mean_ms, duration_text(warm->mean_ms), duration_text(cold->mean_ms),
                                warm->ratio_to_one > 0 ? fmt::format("; {:.2f}x its 1-device start on the same pool", warm->ratio_to_one) : ""));
  }
  if (const BenchRow* resident = ran_row(rows, "fleet, resident")) {
    notes.push_back(fmt::format("resident (the pool held the session already): every device ready {} after the client's exec",
                                duration_text(resident->mean_ms)));
  }
  return notes;
}

/// The fleet's start in the three cache states a user meets, side by side: the model's first start
/// (an empty cache), the cached start, the start without the cache.
std::vector<std::string> cache_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  const BenchRow* cached = ran_row(rows, "fleet");
  const BenchRow* plain = ran_row(rows, "fleet, no model cache");
  const BenchRow* first = ran_row(rows, "fleet, empty cache");
  if (!plain) return notes;
  // Each set against the start without the cache: its ratio with its ±, or that it is within noise.
  const auto against_plain = [&](const BenchRow& r) {
    const TimeRatio t = compare_times(plain->wall_ms, r.wall_ms);
    return fmt::format("{} against {} without the cache: {}", duration_text(r.mean_ms), duration_text(plain->mean_ms),
                       t.within_noise ? "within noise (" + t.text() + ")" : t.text() + " its time");
  };
  if (first) {
    notes.push_back("first start on an empty cache: " + against_plain(*first) +
                    "; its cache entry is made after ready, in the background, and is not part of it");
  }
  if (cached) notes.push_back("cached start: " + against_plain(*cached) + " (the untimed start made the entry)");
  if (const BenchRow* untiered = ran_row(rows, "fleet, empty cache, not tiered"); untiered && first) {
    notes.push_back("tiered first start (first outputs from a quick session, the full one made beside it): " + duration_text(first->mean_ms) +
                    " against " + duration_text(untiered->mean_ms) + " not tiered: " + compare_times(untiered->wall_ms, first->wall_ms).text() +
                    " its time");
  }
  return notes;
}

/// How far each multi-device row's ratio to one device moved over the rounds (a round's own pair),
/// beside the ratio of the means the table shows.
std::vector<std::string> ratio_spread_notes(const std::vector<BenchRow>& rows) {
  std::vector<std::string> notes;
  for (const auto& r : rows) {
    if (!r.ok() || r.ratio_per_round.size() < 2 || r.ratio_to_one <= 0) continue;
    const Summary s = summarize(r.ratio_per_round);
    notes.push_back(fmt::format("{} on {} devices / {}: {:.2f}x (the table's means); each round's own pair {:.2f}x to {:.2f}x over {} rounds",
                                r.label, r.device_count, r.baseline, r.ratio_to_one, s.min, s.max, r.ratio_per_round.size()));
  }
  return notes;
}

/// On more than one GPU: what the driver's start cost the fleet's representative round on every
/// device, and, against the fleet of one GPU, how much of the fleet's extra time it explains.
std::optional<std::string> driver_note(const std::vector<BenchRow>& rows, int device_count, DriverStart& out) {
  const BenchRow* fleet = nullptr;
  for (const auto& r : rows) {
    if (r.ok() && r.label == "fleet" && r.device_count == device_count) fleet = &r;
  }
  if (fleet == nullptr) return std::nullopt;
  const StartReport& start = fleet->median_report;
  out = driver_start_of(start.timeline, start.spawn_ns, start.ready_ns);
  if (out.gpus < 2) {
    out = {};
    return std::nullopt;
  }
  std::string note = "in the fleet's round nearest its median, " + out.summary();
  if (const BenchRow* one = ran_row(rows, "fleet (1 device)")) {
    const StartReport& single = one->median_report;
    const DriverStart one_gpu = driver_start_of(single.timeline, single.spawn_ns, single.ready_ns);
    const double extra = out.fleet_ms - one_gpu.fleet_ms;
    const double driver_extra = out.span_ms - one_gpu.span_ms;
    if (one_gpu.measured() && extra > 0) {
      note += fmt::format(". One GPU's fleet spent {} of its {} there: ", duration_text(one_gpu.span_ms), duration_text(one_gpu.fleet_ms));
      note += driver_extra > 0 ? fmt::format("of the {} the fleet of {} took beyond it, the driver's start accounts for {} ({:.0f}%)",
                                             duration_text(extra), device_count, duration_text(driver_extra), driver_extra / extra * 100)
                               : fmt::format("the driver's start took no longer on {} GPUs, so none of the {} the fleet took beyond it",
                                             device_count, duration_text(extra));
    }
  }
  return note;
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

/// "48.0 s", "3 min 50 s": how long a bench or its part takes, for the notices.
std::string seconds_text(double seconds) { return duration_text(seconds * 1000); }

/// One start of `c`, timed or not: its wall time into the row when timed, the round nearest the
/// median as its report; a failure ends the row, with its reason.
void run_case(const BenchOptions& o, Case& c, BenchPool* pool, bool timed) {
  detail::throw_if_stopped(o.stop);
  if (c.evict_first) pool_evict(pool->server->socket_path());
  std::optional<detail::PrivateDir> empty_cache;  // a first start's: fresh each round, gone after it
  if (c.row.model_cache == "empty") {
    empty_cache = detail::PrivateDir::temporary("ortfleet-bench-first-start");
    c.start.environment[detail::env_name(detail::EnvVar::cache)] = empty_cache->path().string();
  }
  const detail::ColdStart result = detail::run_cold_start(c.start);
  detail::throw_if_stopped(o.stop);
  if (!result.ok()) {
    const bool anchor_on_gpu = c.row.family == "onnxruntime-python" && o.devices.front().is_cuda();
    c.row.error = anchor_on_gpu ? detail::explain_anchor_failure(result.error, o.python) : result.error;
    return;
  }
  const StartReport& start = *result.report;
  if (!timed) return;
  detail::add_timed_round(c.row, start);
  c.row.process_start_ms.push_back(process_start_ms(start));
}

/// The untimed starts before the rounds: the page cache and the model cache's entry need one start
/// of ortfleet's (the cached fleet's, which makes the entry) and Python's imports one anchor, not a
/// round of every case (a round of a large model's anchors on many GPUs takes minutes).
std::vector<Case*> untimed_cases(std::vector<Case>& cases) {
  std::vector<Case*> out;
  auto first = [&](auto pick) {
    const auto it = std::find_if(cases.begin(), cases.end(), pick);
    if (it != cases.end()) out.push_back(&*it);
  };
  const bool cached_fleet = std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.row.label == "fleet"; });
  first([&](const Case& c) { return c.row.family == "ortfleet" && (!cached_fleet || c.row.label == "fleet"); });
  first([](const Case& c) { return c.row.family != "ortfleet"; });
  return out;
}

/// How many timed rounds fit the budget, once `first_round_s` shows what one costs and `elapsed_s`
/// went by: all of them when they fit, else as many as fit (at least one), said in a notice.
int rounds_in_budget(const BenchOptions& o, double elapsed_s, double first_round_s) {
  const double end_s = elapsed_s + first_round_s * (o.runs - 1);
  auto say = [&](const std::string& s) {
    if (o.notice) o.notice(s);
  };
  if (o.budget_s <= 0 || end_s <= o.budget_s || o.runs <= 1) {
    if (o.runs > 1) say(fmt::format("one round took {}: the bench ends in about {}", seconds_text(first_round_s), seconds_text(end_s - elapsed_s)));
    return o.runs;
  }
  const int fit = detail::rounds_that_fit(o.runs, o.budget_s, elapsed_s, first_round_s, 1);
  say(fmt::format("one round took {}: {} rounds would end after {}, past the budget of {} (--budget); running {}{} (--budget 0 runs all {})",
                  seconds_text(first_round_s), o.runs, seconds_text(end_s), seconds_text(o.budget_s), fit == 1 ? "1 round" : fmt::format("{} rounds", fit),
                  fit == 1 ? ": no spread, so no difference can be told from noise" : "", o.runs));
  return fit;
}

/// The untimed starts, then every case once per round, round-robin, so that slow drifts of the
/// machine touch all alike; the rounds cut to the budget once the first shows their cost. Returns the
/// timed rounds run.
int run_rounds(const BenchOptions& o, std::vector<Case>& cases, BenchPool* pool, int& untimed_starts) {
  const int64_t begin = monotonic_ns();
  const auto elapsed_s = [&] { return static_cast<double>(monotonic_ns() - begin) / 1e9; };
  const auto devices_of = [&](const Case& c) { return count_label(std::vector<Device>(o.devices.begin(), o.devices.begin() + c.row.device_count)); };
  untimed_starts = 0;
  for (int round = 0; round < o.warmup_rounds; ++round) {
    for (Case* c : untimed_cases(cases)) {
      if (!c->row.error.empty()) continue;
      if (o.progress) o.progress(fmt::format("untimed start: {} on {}", c->row.label, devices_of(*c)));
      run_case(o, *c, pool, /*timed=*/false);
      ++untimed_starts;
    }
  }
  if (o.notice && untimed_starts > 0 && o.runs > 1) {
    const double per_start = elapsed_s() / untimed_starts;
    o.notice(fmt::format("{} took {}: {} of {} each, about {} at that pace{}", count_text(static_cast<uint64_t>(untimed_starts), "untimed start"),
                         seconds_text(elapsed_s()), count_text(static_cast<uint64_t>(o.runs), "round"), count_text(cases.size(), "start"), seconds_text(per_start * static_cast<double>(cases.size()) * o.runs),
                         o.budget_s > 0 ? fmt::format(" (the budget, --budget, is {})", seconds_text(o.budget_s)) : ""));
  }
  int rounds = o.runs;
  int run = 0;
  for (; run < rounds; ++run) {
    if (run > 0 && o.budget_s > 0 && elapsed_s() >= o.budget_s) break;  // none starts past the budget
    const double round_begin = elapsed_s();
    for (auto& c : cases) {
      if (!c.row.error.empty()) continue;
      if (o.progress) o.progress(fmt::format("round {}/{}: {} on {}", run + 1, rounds, c.row.label, devices_of(c)));
      run_case(o, c, pool, /*timed=*/true);
    }
    if (run == 0) rounds = rounds_in_budget(o, elapsed_s(), elapsed_s() - round_begin);
  }
  return run;
}

}  // namespace

std::optional<std::string> python_fleet_note(const std::vector<BenchRow>& rows) {
  const auto from_python = std::find_if(rows.begin(), rows.end(), [](const BenchRow& r) { return r.strategy == "python-ortfleet" && r.ok(); });
  if (from_python == rows.end()) return std::nullopt;
  const auto cli = std::find_if(rows.begin(), rows.end(), [&](const BenchRow& r) {
    return r.family == "ortfleet" && r.strategy == "fleet" && r.model_cache.empty() && r.warm.empty() &&
           r.device_count == from_python->device_count && r.ok();
  });
  if (cli == rows.end()) return std::nullopt;
  const double interpreter = mean_sigma(from_python->process_start_ms).mean;
  const double after = from_python->mean_ms - interpreter;
  return fmt::format("fleet from Python: {} of its {} went to starting the Python interpreter, before `import ortfleet`; "
                     "from there to ready: {}, {:.2f}x the command line's fleet ({})",
                     duration_text(interpreter), duration_text(from_python->mean_ms), duration_text(after), after / cli->mean_ms,
                     duration_text(cli->mean_ms));
}

void conclude_bench(BenchReport& report, int device_count, const std::string& devices) {
  auto& rows = report.rows;
  for (auto& r : rows) detail::fill_times(r);
  for (auto& r : rows) {
    const BenchRow* base = ran_row(rows, r.baseline);
    if (r.ok() && base != nullptr && !r.baseline.empty()) {
      r.ratio_to_one = r.mean_ms / base->mean_ms;
      r.efficiency = base->mean_ms / r.mean_ms;
      r.ratio_per_round.clear();
      for (size_t i = 0; i < std::min(r.wall_ms.size(), base->wall_ms.size()); ++i) r.ratio_per_round.push_back(r.wall_ms[i] / base->wall_ms[i]);
    }
    if (r.ok() && r.warm.empty() && report.floor_ms > 0 && r.device_count == 1) r.floor_ratio = r.mean_ms / report.floor_ms;
  }
  // The fastest way to bring up all N devices, how each alternative compares, and what made a gain.
  BenchVerdict verdict = bench_verdict(rows, device_count, devices);
  report.fastest = verdict.fastest;
  report.verdict = verdict.headline;
  report.comparisons = std::move(verdict.lines);
  report.comparison_ratios = std::move(verdict.comparisons);
  if (auto note = python_fleet_note(rows)) report.notes.push_back(*note);
  for (auto& note : warm_notes(rows)) report.notes.push_back(std::move(note));
  for (auto& note : cache_notes(rows)) report.notes.push_back(std::move(note));
  for (auto& note : ratio_spread_notes(rows)) report.notes.push_back(std::move(note));
  if (auto note = driver_note(rows, device_count, report.driver_start)) report.notes.push_back(*note);
  for (auto& note : detail::next_job_notes(rows)) report.notes.push_back(std::move(note));
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
  if (o.notice) {
    o.notice(fmt::format("{}, each in a fresh process: {} after {}{}", count_text(cases.size(), "case"),
                         count_text(static_cast<uint64_t>(o.runs), "timed round"),
                         count_text(static_cast<uint64_t>(o.warmup_rounds) * untimed_cases(cases).size(), "untimed start"),
                         o.budget_s > 0 ? fmt::format(", within a budget of {} (--budget)", seconds_text(o.budget_s)) : ""));
  }
  report.runs = run_rounds(o, cases, pool.get(), report.untimed_starts);
  detail::NextJobRows next_job;
  if (o.next_job_rows) {
    next_job = detail::run_next_job_rows(o, ortfleet, std::min(report.runs, 3));
  } else {
    report.skipped.push_back("the next job's rows: turned off (--no-next-job)");
  }
  for (auto& c : cases) report.rows.push_back(std::move(c.row));
  for (auto& r : next_job.rows) report.rows.push_back(std::move(r));
  for (auto& s : next_job.skipped) report.skipped.push_back(std::move(s));
  conclude_bench(report, static_cast<int>(o.devices.size()), count_label(o.devices));
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
  const bool all_gpus = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return detail::device_has(d, detail::Capability::device_memory); });
  if (devices.empty() || !all_gpus) return std::nullopt;
  StartRecord record;
  record.gpus = gpus;
  record.device_count = static_cast<int>(devices.size());
  record.measured_at = utc_now();
  record.model = report.model;
  for (const auto& r : report.rows) {
    const auto way = start_way_of_row(r.label);
    if (way && r.ok() && r.family == "ortfleet" && r.warm.empty() && r.device_count == record.device_count) record.start_ms[*way] = r.mean_ms;
  }
  if (record.start_ms.empty()) return std::nullopt;
  return record;
}

std::string BenchReport::to_json() const {
  json rows_json = json::array();
  for (const auto& r : rows) rows_json.push_back(row_json(r));
  json ratios = json::array();
  for (const auto& c : comparison_ratios) {
    ratios.push_back({{"row", c.row}, {"ratio", c.ratio}, {"sigma", c.sigma}, {"noise_known", c.noise_known}, {"within_noise", c.within_noise},
                      {"gain_from", c.gain_from}});
  }
  json j{{"ortfleet_bench", 1}, {"model", model}, {"machine", machine}, {"onnxruntime", ort_version}, {"floor_ms", floor_ms},
         {"statistic", "mean"}, {"rows", rows_json}, {"skipped", skipped}, {"fastest", fastest}, {"verdict", verdict},
         {"comparisons", comparisons}, {"comparison_ratios", ratios}, {"runs", runs}, {"untimed_starts", untimed_starts}, {"notes", notes}};
  if (driver_start.measured()) j["driver_start"] = json::parse(driver_start.to_json());
  return j.dump(2);
}

BenchTable bench_table(const BenchReport& report) {
  BenchTable table;
  const bool floor = report.floor_ms > 0;
  // The ratio columns are of the means in the "mean ± σ" column (efficiency, their inverse, is in the
  // JSON): each recomputes from the row and its baseline's row.
  table.columns = {"start-up", "devices", "mean ± σ", "min", "max", "vs 1 device"};
  if (floor) table.columns.emplace_back("vs floor");
  for (const auto& r : report.rows) {
    BenchTable::Row row;
    row.failed = !r.ok();
    row.error = r.error;
    row.cells = {r.label, std::to_string(r.device_count)};
    if (row.failed) {
      row.cells.emplace_back("failed");
    } else {
      const std::string spread = r.wall_ms.size() >= 2 ? duration_text(r.mean_ms) + " ± " + duration_text(r.sigma_ms) : duration_text(r.mean_ms);
      row.cells.insert(row.cells.end(), {spread, duration_text(r.min_ms), duration_text(r.max_ms),
                                         r.ratio_to_one > 0 ? fmt::format("{:.2f}x", r.ratio_to_one) : ""});
      if (floor) row.cells.push_back(r.floor_ratio > 0 ? fmt::format("{:.2f}x", r.floor_ratio) : "");
    }
    row.cells.resize(table.columns.size());
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string BenchReport::to_markdown() const {
  std::string out = fmt::format("Model `{}` on {} (ONNX Runtime {}): wall time from exec until every session is created and has run one "
                                "inference; {} timed round{} each, in fresh processes (mean ± σ, min and max; every ratio is of "
                                "the means).\n\n",
                                fs::path(model).filename().string(), machine, ort_version, runs, runs == 1 ? "" : "s");
  const BenchTable table = bench_table(*this);
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
    if (row.failed) {
      cells[2] = "failed: " + row.error;
      std::replace(cells[2].begin(), cells[2].end(), '\n', ' ');  // a traceback's lines would end the table's row
      std::replace(cells[2].begin(), cells[2].end(), '|', '/');
    }
    out += line(cells);
  }
  if (!verdict.empty()) out += "\n" + verdict + ":\n";
  for (const auto& c : comparisons) out += "\n- " + c;
  for (const auto& n : notes) out += "\n- " + n;
  for (const auto& s : skipped) out += "\n- not run: " + s;
  return out + "\n";
}

}  // namespace ortfleet
