// ortfleet start: bring a fleet up once, show where the time went, and exit. `bench` runs it in
// fresh processes (--ready-line) to time each strategy.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <future>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "flag_checks.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/ort_log.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/start_report.hpp"

namespace ortfleet::cli {

namespace {

struct StartFlags {
  TargetFlags target;
  std::string strategy = "auto";
  int warmup = 1;
  std::string timeline_file;
  std::string trace_file;
  std::string profile_dir;
  std::string html;
  bool ready_line = false;
  std::string ort_log;
  double timeout_s = FleetOptions{}.start_timeout_s;
  std::string pool;
  bool no_narrow = false;
  bool one_process = false;
  double run_for_s = 0;
  RunConfigFlags config;
};

/// The calls a job makes right after ready, on every device at once: their latencies.
struct CallsAfterReady {
  double seconds = 0;
  size_t calls = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double switched_after_ms = 0;    ///< a tiered start: when its full session took over, after ready
  double p50_after_switch_ms = 0;  ///< the calls that began after that
  std::string error;
};

/// Runs the model on every ready device, one thread each, back to back for `seconds` (what a job does
/// once it is ready, while whatever the start left behind works in the background).
CallsAfterReady run_after_ready(Fleet& fleet, const RunConfig& config, double seconds) {
  CallsAfterReady result;
  result.seconds = seconds;
  std::vector<TensorSpec> specs = fleet.inputs();
  if (!config.shapes.declared.empty()) {
    for (auto& spec : specs) {
      const auto declared = config.shapes.declared.front().find(spec.name);
      if (declared != config.shapes.declared.front().end()) spec.shape = declared->second;
    }
  }
  std::vector<Tensor> inputs;
  try {
    inputs = random_inputs(specs, 7, 1, config.warmup.input_ranges);
  } catch (const std::exception& e) {
    result.error = e.what();
    return result;
  }
  std::mutex mutex;
  std::vector<double> ms;
  std::vector<std::pair<Device, std::pair<int64_t, double>>> timed;  // each call's device, start and milliseconds
  std::vector<std::thread> threads;
  const int64_t end = monotonic_ns() + static_cast<int64_t>(seconds * 1e9);
  for (const auto& d : fleet.status()) {
    if (d.state != DeviceState::ready) continue;
    threads.emplace_back([&, device = d.device] {
      std::vector<std::pair<int64_t, double>> mine;
      try {
        while (monotonic_ns() < end) {
          const int64_t start = monotonic_ns();
          fleet.run(device, inputs);
          mine.emplace_back(start, static_cast<double>(monotonic_ns() - start) / 1e6);
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        result.error = e.what();
      }
      std::lock_guard lock(mutex);
      for (const auto& call : mine) {
        ms.push_back(call.second);
        timed.emplace_back(device, call);
      }
    });
  }
  for (auto& t : threads) t.join();
  // A tiered start's calls after its full session took over: the steady speed it switched to.
  std::vector<double> after_switch;
  for (const auto& d : fleet.status()) {
    if (d.tier != "full") continue;
    result.switched_after_ms = std::max(result.switched_after_ms, d.tier_full_ms);
    const int64_t switched = d.ready_ns + static_cast<int64_t>(d.tier_full_ms * 1e6);
    for (const auto& [device, call] : timed) {
      if (device == d.device && call.first >= switched) after_switch.push_back(call.second);
    }
  }
  if (!after_switch.empty()) {
    std::sort(after_switch.begin(), after_switch.end());
    result.p50_after_switch_ms = after_switch[after_switch.size() / 2];
  }
  std::sort(ms.begin(), ms.end());
  result.calls = ms.size();
  if (!ms.empty()) {
    result.p50_ms = ms[ms.size() / 2];
    result.p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  }
  return result;
}

/// Durations per phase (rows) and lane (columns): where each device's start-up went.
void print_start_report(const StartReport& r, std::ostream& out) {
  out << "model " << terminal_text(r.model) << ", strategy " << r.strategy << ", " << count_text(r.devices.size(), "device");
  out << (r.devices_reason.empty() ? "" : ": " + terminal_text(r.devices_reason)) << "\n";
  if (!r.strategy_reason.empty() && r.strategy_why != StrategyWhy::as_asked) out << r.strategy_reason << "\n";
  out << "\n";
  Table devices({"device", "state", "ready after exec", "session", "provider", "pid", "error"},
                {false, false, true, false, false, true, false});
  for (const auto& d : r.devices) {
    devices.add({d.device.to_string(), to_string(d.state),
                 d.state == DeviceState::ready ? duration_text(static_cast<double>(d.ready_ns - r.spawn_ns) / 1e6) : "-",
                 d.state != DeviceState::ready ? "-" : d.resident ? "resident" : "new", d.provider, std::to_string(d.pid), one_line(d.error)});
  }
  devices.print(out);
  out << "\n";
  // Lanes: the shared "process" lane first, then devices; phases in order of first start.
  std::vector<std::string> lanes;
  std::vector<std::string> phases;
  std::map<std::pair<std::string, std::string>, double> ms;
  for (const auto& e : r.timeline.events()) {
    if (e.name == std::string(phase::ready)) continue;
    if (std::find(lanes.begin(), lanes.end(), e.lane) == lanes.end()) lanes.push_back(e.lane);
    if (std::find(phases.begin(), phases.end(), e.name) == phases.end()) phases.push_back(e.name);
    ms[{e.name, e.lane}] += e.duration_ms();
  }
  std::stable_sort(lanes.begin(), lanes.end(), [](const std::string& a, const std::string& b) {
    return (a == "process") != (b == "process") ? a == "process" : a < b;
  });
  std::vector<std::string> headers = {"phase (ms)"};
  headers.insert(headers.end(), lanes.begin(), lanes.end());
  std::vector<bool> right(headers.size(), true);
  right[0] = false;
  Table table(headers, right);
  for (const auto& p : phases) {
    std::vector<std::string> row = {p};
    for (const auto& l : lanes) {
      auto it = ms.find({p, l});
      row.push_back(it == ms.end() ? "" : fmt::format("{:.0f}", it->second));
    }
    table.add(row);
  }
  const bool resident = !r.devices.empty() && std::all_of(r.devices.begin(), r.devices.end(), [](const DeviceStatus& d) { return d.resident; });
  table.print(out, resident ? "no phases: every session was resident on the pool already" : "no phases were recorded");
  out << "\n" << (r.all_ready ? "every device ready " : "done (with failures) ") << duration_text(r.wall_ms()) << " after exec\n";
}

/// After the report: what the start left for later starts. The cache entry this process makes itself
/// (no warm pool took it over) is waited for, so that the next start can use it: it ends with this
/// process otherwise. Said on stderr, so that stdout keeps only the result.
void finish_background_work(Fleet& fleet, const Globals& g) {
  std::cout << std::flush;  // the report first, whole, even into a pipe
  // Deciding what the start leaves (a fill planned, a pool launched) can take seconds on a large model:
  // said once it does, not after.
  auto deciding = std::async(std::launch::async, [&fleet] { return fleet.wait_for_cache_fill(0); });
  if (deciding.wait_for(std::chrono::seconds(1)) != std::future_status::ready && !g.quiet) {
    std::cerr << "after ready: setting up what this start leaves for later starts (the model cache entry, a warm pool)" << std::endl;
  }
  const auto early = deciding.get();  // also: every note of what was left is in
  // What keeps running after this process (a warm pool) is said even with -q: nobody asked for it.
  for (const auto& note : fleet.left_behind()) std::cerr << terminal_text(note) << std::endl;
  if (early) {
    if (!g.quiet) std::cerr << terminal_text(*early) << std::endl;
    return;
  }
  if (!fleet.making_cache_entry()) return;
  if (!g.quiet) {
    std::cerr << "waiting for it before exiting, so that the next start loads it (Ctrl-C skips it; nothing of it stays)" << std::endl;
  }
  const auto done = fleet.wait_for_cache_fill(FleetOptions{}.start_timeout_s);
  if (done && !g.quiet) std::cerr << terminal_text(*done) << std::endl;
}

/// The flags of `start` that do nothing together, refused before any work (FlagChecks).
void check_start_flags(const CLI::App& cmd, const StartFlags& f) {
  const FlagChecks flags(cmd);
  f.config.check(flags);
  const bool in_process = f.strategy == "sequential" || f.strategy == "threads";
  for (const char* pool_flag : {"--warm-pool-idle", "--warm-pool-park"}) {
    if (flags.given(pool_flag) && f.strategy != "auto") {
      FlagChecks::refuse(std::string(pool_flag) + " does nothing with --strategy " + f.strategy +
                         ": only --strategy auto leaves a warm pool; leave one of them out");
    }
    flags.excludes(pool_flag, "--pool", "a start on a pool leaves none of its own");
  }
  if (flags.given("--pool") && f.strategy != "auto" && f.strategy != "fleet") {
    FlagChecks::refuse("--strategy " + f.strategy + " does nothing with --pool: a pool starts sessions the fleet's way; leave one of them out");
  }
  if (flags.given("--one-process") && f.strategy != "auto" && f.strategy != "fleet") {
    FlagChecks::refuse("--one-process does nothing with --strategy " + f.strategy + ": it is the fleet's choice; use --strategy fleet or auto");
  }
  flags.excludes("--one-process", "--pool", "a pool's sessions live in its workers");
  if (flags.given("--no-narrow-workers") && in_process) {
    FlagChecks::refuse("--no-narrow-workers does nothing with --strategy " + f.strategy + ": it starts no worker process; leave one of them out");
  }
  flags.excludes("--no-narrow-workers", "--one-process", "no worker process is started");
  flags.excludes("--run-for", "--ready-line", "--ready-line ends the start at ready");
}

/// Waits for every device; on a terminal, says meanwhile how many are ready and how long it has been
/// (a large model's start is otherwise silent for seconds).
void wait_saying_progress(Fleet& fleet, const std::string& model, bool enabled) {
  ProgressLine progress(enabled);
  if (!progress.enabled()) {
    fleet.wait();  // a bench's timed child (--ready-line) polls nothing
    return;
  }
  const int64_t begin = monotonic_ns();
  while (true) {
    const auto status = fleet.status();
    const auto count = [&](std::initializer_list<DeviceState> states) {
      return std::count_if(status.begin(), status.end(), [&](const DeviceStatus& d) { return std::find(states.begin(), states.end(), d.state) != states.end(); });
    };
    if (count({DeviceState::pending, DeviceState::starting}) == 0) break;
    const double seconds = static_cast<double>(monotonic_ns() - begin) / 1e9;
    if (seconds >= 1) {
      progress.update(fmt::format("starting {} on {} device{}: {} ready{}, {:.0f} s", std::filesystem::path(model).filename().string(),
                                  status.size(), status.size() == 1 ? "" : "s", count({DeviceState::ready}),
                                  count({DeviceState::failed}) > 0 ? fmt::format(", {} failed", count({DeviceState::failed})) : "", seconds));
    }
    fleet.wait(0.2);
  }
  fleet.wait();
}

int run_start(const StartFlags& f, const Globals& g) {
  refuse_overwriting_inputs({{"--timeline", f.timeline_file}, {"--trace", f.trace_file}, {"--html", f.html}, {"--ort-log", f.ort_log}}, f.target,
                            f.config);
  const int64_t main_ns = monotonic_ns();
  FleetOptions options;
  options.strategy = parse_strategy(f.strategy);
  options.warmup_runs = f.warmup;
  options.ort_library = g.ort_lib;
  options.profile_dir = f.profile_dir;
  options.start_timeout_s = f.timeout_s;
  options.narrow_workers = !f.no_narrow;
  options.one_process = f.one_process;
  if (!f.pool.empty()) options.pool_socket = pool_socket_named(f.pool);
  const std::string model = f.target.model_path(g.quiet || f.ready_line);
  // A bench's child start (--ready-line) was checked by the bench: its timed start reads no more.
  options.config = f.ready_line ? f.config.resolve() : f.config.resolve_for(model);
  say_what_runs(model, f.target.devices, options.config);
  // "all" is the fleet's to resolve (under Slurm: what Slurm gave), so that its report says why.
  if (!f.target.means_all()) options.devices = f.target.device_list();

  std::unique_ptr<OrtLogCapture> capture;
  if (!f.ort_log.empty()) capture = std::make_unique<OrtLogCapture>(f.ort_log);
  Fleet fleet(model, options);
  options.devices = fleet.devices();
  fleet.start();
  wait_saying_progress(fleet, model, !g.quiet && !f.ready_line);
  const StartReport result = make_start_report(fleet, model, main_ns);
  if (f.ready_line) {
    // One line, as soon as every device is done, for the benchmark parent to read.
    std::cout << result.to_json() << std::endl;
  }
  // Buckets every device refused once the model ran (padding changed its outputs): a setting to change,
  // said as one refused before any work is (exit 2).
  if (!result.devices.empty() && std::all_of(result.devices.begin(), result.devices.end(), [](const DeviceStatus& d) { return refuses_buckets(d.error); })) {
    throw SettingRefused(Error(result.devices.front().error));
  }
  if (!f.timeline_file.empty()) write_output_file(f.timeline_file, stamped(result.timeline.to_json(), g, options.devices));
  if (!f.trace_file.empty()) write_output_file(f.trace_file, result.timeline.to_chrome_trace());
  if (!f.ready_line) {
    std::string stamped_result = stamped(result.to_json(), g, options.devices);
    std::optional<CallsAfterReady> after;
    if (f.run_for_s > 0 && result.all_ready) {
      after = run_after_ready(fleet, options.config, f.run_for_s);
      auto j = nlohmann::json::parse(stamped_result);
      j["calls_after_ready"] = {{"seconds", after->seconds}, {"calls", after->calls}, {"p50_ms", after->p50_ms},
                                {"p99_ms", after->p99_ms}, {"error", after->error}};
      if (after->switched_after_ms > 0) {
        j["calls_after_ready"]["switched_after_ms"] = after->switched_after_ms;
        j["calls_after_ready"]["p50_after_switch_ms"] = after->p50_after_switch_ms;
      }
      j["tiers"] = nlohmann::json::array();
      for (const auto& d : fleet.status()) {
        if (!d.tier.empty()) j["tiers"].push_back({{"device", d.device.to_string()}, {"tier", d.tier}, {"full_ms", d.tier_full_ms}, {"note", d.tier_note}});
      }
      stamped_result = j.dump(2);
    }
    if (g.json) std::cout << stamped_result << std::endl;
    else print_start_report(result, std::cout);
    if (after && !g.json) {
      if (!after->error.empty()) std::cout << "calls after ready failed: " << after->error << "\n";
      else std::cout << fmt::format("calls in the first {:g} s after ready: {} (p50 {:.3g} ms, p99 {:.3g} ms)\n", after->seconds, after->calls,
                                    after->p50_ms, after->p99_ms);
      if (after->switched_after_ms > 0) {
        std::cout << fmt::format("tiered start: the full session took over {:.1f} s after ready; calls after it: p50 {:.3g} ms\n",
                                 after->switched_after_ms / 1000, after->p50_after_switch_ms);
      }
    }
    write_html(f.html, stamped_result, g);
  }
  finish_background_work(fleet, g);
  fleet.shutdown();
  return result.all_ready ? kExitOk : kExitDeviceFailed;
}

}  // namespace

void register_start(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("start", "Start one session per device once; show the start-up timeline");
  auto f = std::make_shared<StartFlags>();
  f->target.add_to(cmd, /*one_device=*/false);
  add_setting_option(cmd, Setting::strategy, f->strategy, "-s,--strategy");  // name, help and check: the settings table's
  add_setting_option(cmd, Setting::warmup_runs, f->warmup);
  add_output_option(cmd, "--timeline", f->timeline_file, setting_row(Setting::timeline).help);
  add_output_option(cmd, "--trace", f->trace_file, "Write a Chrome/Perfetto trace here (open in ui.perfetto.dev)");
  add_html_option(cmd, f->html);
  add_output_option(cmd, "--profile-dir", f->profile_dir, setting_row(Setting::profile_dir).help, /*folder=*/true);
  add_setting_option(cmd, Setting::start_timeout, f->timeout_s);
  cmd->add_option("--pool", f->pool,
                  std::string("Start on the warm pool of `ortfleet serve` listening on this socket ('default': ") + kDefaultSocketDoc + ")");
  add_setting_flag(cmd, Setting::narrow_workers, f->no_narrow);
  add_setting_flag(cmd, Setting::one_process, f->one_process);
  cmd->add_flag("--ready-line", f->ready_line, "Print one JSON line when every device is done (for bench)");
  in_range(cmd->add_option("--run-for", f->run_for_s,
                           "Once ready, run the model on every device for this many seconds, as a job would, and report the calls' p50 "
                           "and p99 (what the work a start leaves behind costs a job's first calls)"),
           {.lo = 0, .hi = 3600, .unit = "seconds", .whole = false});
  add_output_option(cmd, "--ort-log", f->ort_log, setting_row(Setting::ort_log).help);
  f->config.add_to(cmd, /*leaves_warm_pool=*/true);
  cmd->callback([cmd, &globals, &action, f] {
    check_start_flags(*cmd, *f);
    action = [&globals, f] { return run_start(*f, globals); };
  });
}

}  // namespace ortfleet::cli
