#include "ortfleet/diagnostics/throughput.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "diagnostics/machine.hpp"
#include "diagnostics/python_anchor.hpp"
#include "base/private_dir.hpp"
#include "fleet/local_start.hpp"
#include "fleet/worker.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/statistics.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/engine/shapes.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/synth/synth.hpp"
#include "process/child_process.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {

/// Each thread runs inferences on its device until the deadline; returns per-inference latencies.
std::vector<std::vector<double>> hammer(Fleet& fleet, const std::vector<Device>& per_thread, double seconds) {
  const auto inputs = random_inputs(fleet.inputs(), 7);
  std::vector<std::vector<double>> latencies(per_thread.size());
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  int64_t deadline = 0;
  for (size_t t = 0; t < per_thread.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) fleet.run(per_thread[t], inputs);  // warm, untimed
      while (!go.load()) std::this_thread::yield();
      while (monotonic_ns() < deadline) {
        const int64_t start = monotonic_ns();
        fleet.run(per_thread[t], inputs);
        latencies[t].push_back(static_cast<double>(monotonic_ns() - start) / 1e6);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let every thread finish its warm-up
  deadline = monotonic_ns() + static_cast<int64_t>(seconds * 1e9);
  go = true;
  for (auto& th : threads) th.join();
  return latencies;
}

ThroughputRow measure(const std::string& label, Fleet& fleet, const std::vector<Device>& per_thread, double seconds, int devices) {
  const auto latencies = hammer(fleet, per_thread, seconds);
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  ThroughputRow row;
  row.label = label;
  row.devices = devices;
  row.threads = static_cast<int>(per_thread.size());
  row.inferences_per_s = static_cast<double>(all.size()) / seconds;
  row.p50_ms = percentile(all, 50);
  row.p99_ms = percentile(all, 99);
  return row;
}

/// One thread keeps `depth` runs in flight on `device` (run_async) until the deadline: the throughput
/// a single client gets from pipelining. Latencies are from submit to result.
ThroughputRow pipelined(const std::string& label, Fleet& fleet, const Device& device, double seconds, size_t depth) {
  const auto inputs = random_inputs(fleet.inputs(), 7);
  std::deque<std::pair<int64_t, std::future<std::vector<Tensor>>>> in_flight;
  std::vector<double> latencies;
  const auto collect = [&] {
    in_flight.front().second.get();
    latencies.push_back(static_cast<double>(monotonic_ns() - in_flight.front().first) / 1e6);
    in_flight.pop_front();
  };
  for (int i = 0; i < 3; ++i) fleet.run(device, inputs);  // warm, untimed
  const int64_t start = monotonic_ns();
  const int64_t deadline = start + static_cast<int64_t>(seconds * 1e9);
  while (monotonic_ns() < deadline) {
    while (in_flight.size() < depth) in_flight.emplace_back(monotonic_ns(), fleet.run_async(device, inputs));
    collect();
  }
  while (!in_flight.empty()) collect();
  ThroughputRow row;
  row.label = label;
  row.devices = 1;
  row.threads = 1;
  row.inferences_per_s = static_cast<double>(latencies.size()) / (static_cast<double>(monotonic_ns() - start) / 1e9);
  row.p50_ms = percentile(latencies, 50);
  row.p99_ms = percentile(latencies, 99);
  return row;
}

/// What a call through a worker process costs by itself: an identity model at batch 1 (nothing to
/// compute) through the request ring and through the socket, against a session in this process.
void add_round_trips(const ThroughputOptions& o, ThroughputReport& report) {
  const Device device = o.devices.front();
  const auto folder = detail::PrivateDir::temporary("ortfleet-round-trip");
  const std::string model = (folder.path() / "identity.onnx").string();
  synth::write_identity(model, synth::IdentitySpec{});
  struct Way {
    std::string label;
    const char* short_name;  // in the note
    Strategy strategy;
    const char* ring;  // kRingVariable while the fleet starts: its workers take a ring or not
  };
  const std::vector<Way> ways = {{"worker round trip, identity batch 1, request ring", "request ring", Strategy::processes, "1"},
                                 {"worker round trip, identity batch 1, socket", "socket", Strategy::processes, "0"},
                                 {"in-process call, identity batch 1", "in process", Strategy::threads, "1"}};
  std::string note = fmt::format("round trip (identity model, batch 1, {}, host inputs):", device.to_string());
  for (const auto& way : ways) {
    if (o.progress) o.progress(fmt::format("{}, {:.0f} s", way.label, o.seconds));
    FleetOptions fo;
    fo.devices = {device};
    fo.strategy = way.strategy;
    fo.config = o.config;
    fo.ort_library = o.ort_library;
    Fleet fleet(model, fo);
    {
      const char* saved = std::getenv(detail::kRingVariable);
      const std::string previous = saved != nullptr ? saved : "";
      ::setenv(detail::kRingVariable, way.ring, 1);
      fleet.start();
      const bool ready = fleet.wait();
      if (saved != nullptr) ::setenv(detail::kRingVariable, previous.c_str(), 1);
      else ::unsetenv(detail::kRingVariable);
      if (!ready) throw Error("the identity model failed to start on " + device.to_string() + ": " + fleet.status().front().error);
    }
    report.rows.push_back(measure(way.label, fleet, {device}, o.seconds, 1));
    const auto& row = report.rows.back();
    note += fmt::format(" {} p50 {:.1f} us, p99 {:.1f} us;", way.short_name, row.p50_ms * 1000, row.p99_ms * 1000);
    if (way.strategy == Strategy::processes && std::string(way.ring) == "1") {
      constexpr size_t kDepth = 8;
      if (o.progress) o.progress(fmt::format("one thread, {} runs in flight through the ring, {:.0f} s", kDepth, o.seconds));
      report.rows.push_back(pipelined(fmt::format("worker, identity batch 1, {} in flight from one thread (run_async)", kDepth), fleet,
                                      device, o.seconds, kDepth));
    }
  }
  note.pop_back();
  report.notes.push_back(note);
}

// --- shape mix ------------------------------------------------------------------------------------

std::string mix_text(const std::vector<int64_t>& mix) {
  std::string out;
  for (const auto b : mix) out += (out.empty() ? "" : ",") + std::to_string(b);
  return out;
}

/// Generated inputs of batch `batch` (the first dim of inputs whose first dim is dynamic).
std::vector<Tensor> inputs_of_batch(const std::vector<TensorSpec>& specs, int64_t batch) {
  ShapeOptions one;
  one.batches = {batch};
  return random_inputs(with_shapes(specs, resolve_shapes(specs, one, 1).front()), 7);
}

/// One Session made with `config` on `device`, ready, then a stream of calls whose batch follows the
/// mix for `seconds`: its row. The first call of each shape after ready is timed on its own.
ThroughputRow stream_mix(const std::string& label, const ThroughputOptions& o, const Device& device, const RunConfig& config,
                         const std::vector<int64_t>& mix) {
  ThroughputRow row;
  row.label = label;
  row.devices = 1;
  row.threads = 1;
  SessionSpec spec;
  spec.model_path = o.model;
  spec.device = device;
  spec.config = detail::tuned_for_fleet(config, device, 1);
  Session session(spec);
  session.warm_up(1);
  std::vector<int64_t> batches = mix;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  std::map<int64_t, std::vector<Tensor>> inputs;
  for (const auto b : batches) inputs[b] = inputs_of_batch(session.inputs(), b);
  std::map<int64_t, double> first_call;
  for (const auto b : batches) {
    const int64_t start = monotonic_ns();
    session.run(inputs[b]);
    first_call[b] = static_cast<double>(monotonic_ns() - start) / 1e6;
  }
  std::mt19937_64 rng(7);
  std::vector<double> all;
  std::map<int64_t, std::vector<double>> per_batch;
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(o.seconds * 1e9);
  for (size_t i = 0; monotonic_ns() < deadline; ++i) {
    const int64_t b = o.random_order ? mix[rng() % mix.size()] : mix[i % mix.size()];
    const int64_t start = monotonic_ns();
    session.run(inputs[b]);
    const double ms = static_cast<double>(monotonic_ns() - start) / 1e6;
    all.push_back(ms);
    per_batch[b].push_back(ms);
  }
  row.inferences_per_s = static_cast<double>(all.size()) / o.seconds;
  row.p50_ms = percentile(all, 50);
  row.p99_ms = percentile(all, 99);
  for (const auto& [b, ms] : first_call) {
    // The slowest first call, as a multiple of its shape's steady p50.
    if (ms > row.first_call_ms) row.first_call_ms = ms;
    const double steady = percentile(per_batch[b], 50);
    if (steady > 0) row.first_call_ratio = std::max(row.first_call_ratio, ms / steady);
  }
  row.memory_bytes = session.memory_bytes();
  row.sessions = static_cast<int>(session.shape_sessions().size());
  return row;
}

/// onnxruntime's Python API, one session, the same stream: what a Python user sees today.
ThroughputRow python_mix(const std::string& label, const ThroughputOptions& o, const std::string& anchor, const Device& device) {
  ThroughputRow row;
  row.label = label;
  row.devices = 1;
  row.threads = 1;
  std::vector<std::string> argv = {o.python, anchor, o.model, "--devices", device.to_string(), "--mode", "sequential",
                                   "--conv-algo", to_string(o.config.cuda.conv_algo_search), "--shape-mix", mix_text(o.shape_mix),
                                   "--order", o.random_order ? "random" : "cycle", "--seconds", fmt::format("{}", o.seconds)};
  if (device.is_gpu()) {
    if (auto ep = find_cuda_ep()) argv.insert(argv.end(), {"--cuda-ep", ep->path});
  }
  const auto child = detail::run_child(argv, {}, "{", 600 + 4 * o.seconds);
  try {
    const auto j = nlohmann::json::parse(child.report_line);
    row.inferences_per_s = j.at("inferences_per_s").get<double>();
    row.p50_ms = j.at("p50_ms").get<double>();
    row.p99_ms = j.at("p99_ms").get<double>();
    row.first_call_ms = j.at("first_call_ms").get<double>();
    row.sessions = 1;
  } catch (const std::exception&) {
    row.error = child.describe();
  }
  return row;
}

ThroughputReport run_shape_mix(const ThroughputOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  for (const auto b : o.shape_mix) {
    if (b <= 0) throw Error("batch sizes of a shape mix must be positive", "Write it as 1,2 or 1,8,32");
  }
  const Device device = o.devices.front();
  const std::string mix = mix_text(o.shape_mix);
  const std::string order = o.random_order ? ", random order" : "";
  ThroughputReport report;
  report.model = o.model;
  report.machine = detail::machine_description({device});
  std::vector<int64_t> batches = o.shape_mix;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());

  // Each batch alone: the latency a session that never switches shapes gets.
  for (const auto b : batches) {
    say(fmt::format("batch {} only, {:.0f} s", b, o.seconds));
    RunConfig alone = o.config;
    alone.shapes.declared.clear();
    alone.shapes.batches = {b};
    report.rows.push_back(stream_mix(fmt::format("same shape, batch {}", b), o, device, alone, {b}));
  }
  say(fmt::format("one ONNX Runtime session, shape mix {}, {:.0f} s", mix, o.seconds));
  RunConfig one = o.config;
  one.shapes = ShapeOptions{};
  one.shapes.max_sessions = 1;
  report.rows.push_back(stream_mix(fmt::format("one session, shape mix {}{}", mix, order), o, device, one, o.shape_mix));
  say(fmt::format("shape-aware sessions, shape mix {}, {:.0f} s", mix, o.seconds));
  RunConfig aware = o.config;
  aware.shapes.batches = batches;
  if (aware.shapes.max_sessions < static_cast<int>(batches.size())) aware.shapes.max_sessions = static_cast<int>(batches.size());
  report.rows.push_back(stream_mix(fmt::format("shape-aware, shape mix {}{}", mix, order), o, device, aware, o.shape_mix));
  const size_t aware_index = report.rows.size() - 1;
  if (device.is_gpu()) {
    say(fmt::format("shape-aware sessions with a copy of the weights each, shape mix {}, {:.0f} s", mix, o.seconds));
    RunConfig own_weights = aware;
    own_weights.shapes.share_weights = false;
    report.rows.push_back(stream_mix(fmt::format("shape-aware, weights not shared, shape mix {}{}", mix, order), o, device, own_weights,
                                     o.shape_mix));
  }
  if (o.anchors) {
    if (const auto anchor = detail::find_anchor_script(); !anchor) {
      report.notes.push_back("not run: onnxruntime Python, one session: bench/anchors/onnxruntime_python.py not found");
    } else if (const auto problem = detail::anchor_problem(o.python)) {
      report.notes.push_back("not run: onnxruntime Python, one session: " + *problem);
    } else {
      say(fmt::format("onnxruntime's Python API, one session, shape mix {}, {:.0f} s", mix, o.seconds));
      report.rows.push_back(python_mix(fmt::format("python onnxruntime, one session, shape mix {}{}", mix, order), o, *anchor, device));
    }
  }

  const ThroughputRow& aware_row = report.rows[aware_index];
  const ThroughputRow& one_row = report.rows[batches.size()];
  const ThroughputRow& largest_alone = report.rows[batches.size() - 1];
  for (auto& r : report.rows) r.speedup = one_row.inferences_per_s > 0 ? r.inferences_per_s / one_row.inferences_per_s : 0;
  const double faster = one_row.p50_ms / aware_row.p50_ms;
  report.notes.push_back(fmt::format("shape-aware is {:.2f}x {} than one session on the shape mix {} (p50 {:.3g} ms against {:.3g} ms)",
                                     faster >= 1 ? faster : 1 / faster, faster >= 1 ? "faster" : "slower", mix, aware_row.p50_ms,
                                     one_row.p50_ms));
  report.notes.push_back(fmt::format("shape-aware p50 on the mix is {:.2f}x the same-shape p50 of batch {} ({:.3g} ms)",
                                     aware_row.p50_ms / largest_alone.p50_ms, batches.back(), largest_alone.p50_ms));
  report.notes.push_back(fmt::format("first call of a declared shape after ready: {:.3g} ms, {:.2f}x its steady p50 (one session: {:.3g} ms)",
                                     aware_row.first_call_ms, aware_row.first_call_ratio, one_row.first_call_ms));
  if (batches.size() > 1) {
    const uint64_t weights = inspect_model(o.model).initializer_bytes;
    auto memory_note = [&](const ThroughputRow& row, const char* what) {
      const double extra = (static_cast<double>(row.memory_bytes) - static_cast<double>(one_row.memory_bytes)) /
                           static_cast<double>(batches.size() - 1);
      return fmt::format("memory{}: {} sessions hold {:.1f} MB, one session {:.1f} MB: {:.1f} MB for each extra shape session, "
                         "{:.0f}% of the model's {:.1f} MB of weights",
                         what, row.sessions, static_cast<double>(row.memory_bytes) / 1e6, static_cast<double>(one_row.memory_bytes) / 1e6,
                         extra / 1e6, weights > 0 ? 100.0 * extra / static_cast<double>(weights) : 0.0, static_cast<double>(weights) / 1e6);
    };
    report.notes.push_back(memory_note(aware_row, device.is_gpu() ? " (weights shared)" : ""));
    if (device.is_gpu()) report.notes.push_back(memory_note(report.rows[aware_index + 1], " (a copy of the weights each)"));
  }
  return report;
}

}  // namespace

ThroughputReport run_throughput(const ThroughputOptions& options) {
  ThroughputOptions o = options;
  if (o.devices.empty()) o.devices = parse_devices("all", gpu_count());
  validate_model_file(o.model);
  load_runtime(o.ort_library);
  if (!o.shape_mix.empty()) return run_shape_mix(o);
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  FleetOptions fo;
  fo.config = o.config;
  fo.ort_library = o.ort_library;
  fo.strategy = Strategy::fleet;
  ThroughputReport report;
  report.model = o.model;
  report.machine = detail::machine_description(o.devices);
  const Device first = o.devices.front();
  const int n = static_cast<int>(o.devices.size());
  {
    fo.devices = {first};
    say("starting one session on " + first.to_string());
    Fleet one(o.model, fo);
    one.start();
    if (!one.wait()) throw Error("the session on " + first.to_string() + " failed: " + one.status().front().error);
    say(fmt::format("1 session, 1 thread, {:.0f} s", o.seconds));
    report.rows.push_back(measure("1 device, 1 thread", one, {first}, o.seconds, 1));
    if (n > 1) {
      say(fmt::format("1 session, {} threads, {:.0f} s", n, o.seconds));
      report.rows.push_back(measure(fmt::format("1 device, {} threads on one session", n), one,
                                    std::vector<Device>(static_cast<size_t>(n), first), o.seconds, 1));
    }
  }
  if (n > 1) {
    // Where the sessions live changes what a call costs: a worker process answers through shared
    // memory (the fleet's start-up), a session in this process is called directly (threads).
    fo.devices = o.devices;
    for (const auto& [strategy, where] : {std::pair{Strategy::fleet, "a worker process each"}, std::pair{Strategy::threads, "in this process"}}) {
      fo.strategy = strategy;
      say(fmt::format("starting {} sessions, one per device, {}", n, where));
      Fleet all(o.model, fo);
      all.start();
      if (!all.wait()) throw Error(fmt::format("the {} strategy failed to start on every device", to_string(strategy)));
      say(fmt::format("{} sessions, {}, one thread each, {:.0f} s", n, where, o.seconds));
      report.rows.push_back(measure(fmt::format("{} devices, one session each, {}", n, where), all, o.devices, o.seconds, n));
    }
  }
  for (auto& r : report.rows) r.speedup = r.inferences_per_s / report.rows.front().inferences_per_s;
  add_round_trips(o, report);  // speed-ups compare models of the same kind: these rows have none
  return report;
}

std::string ThroughputReport::to_json() const {
  json out = json::array();
  for (const auto& r : rows) {
    out.push_back({{"label", r.label},
                   {"devices", r.devices},
                   {"threads", r.threads},
                   {"inferences_per_s", r.inferences_per_s},
                   {"p50_ms", r.p50_ms},
                   {"p99_ms", r.p99_ms},
                   {"speedup", r.speedup},
                   {"first_call_ms", r.first_call_ms},
                   {"first_call_ratio", r.first_call_ratio},
                   {"memory_bytes", r.memory_bytes},
                   {"sessions", r.sessions},
                   {"error", r.error}});
  }
  return json{{"ortfleet_throughput", 1}, {"model", model}, {"machine", machine}, {"rows", out}, {"notes", notes}}.dump(2);
}

}  // namespace ortfleet
