#include "ortfleet/diagnostics/throughput.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <future>
#include <latch>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "diagnostics/machine.hpp"
#include "diagnostics/python_anchor.hpp"
#include "diagnostics/shape_stream.hpp"
#include "base/private_dir.hpp"
#include "fleet/local/local_start.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/error.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/device_tensor.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/synth/synth.hpp"
#include "process/child_process.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {

/// Each thread runs inferences on its device with its inputs until the deadline; returns per-inference
/// latencies. A thread's failure is rethrown here once every thread has stopped.
std::vector<std::vector<double>> hammer(Fleet& fleet, const std::vector<Device>& per_thread,
                                        const std::vector<std::vector<Tensor>>& inputs, double seconds) {
  const size_t n = per_thread.size();
  std::vector<std::vector<double>> latencies(n);
  std::vector<std::exception_ptr> errors(n);
  std::latch warm(static_cast<std::ptrdiff_t>(n));
  std::latch go(1);
  int64_t deadline = 0;  // set before `go` opens
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 3; ++i) fleet.run(per_thread[t], inputs[t]);  // warm, untimed
      } catch (...) {
        errors[t] = std::current_exception();
      }
      warm.count_down();
      go.wait();
      if (errors[t]) return;
      try {
        while (monotonic_ns() < deadline) {
          const int64_t start = monotonic_ns();
          fleet.run(per_thread[t], inputs[t]);
          latencies[t].push_back(static_cast<double>(monotonic_ns() - start) / 1e6);
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  warm.wait();  // every thread has finished its warm-up
  deadline = monotonic_ns() + static_cast<int64_t>(seconds * 1e9);
  go.count_down();
  for (auto& th : threads) th.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return latencies;
}

ThroughputRow measure(const std::string& label, Fleet& fleet, const std::vector<Device>& per_thread,
                      const std::vector<std::vector<Tensor>>& inputs, double seconds, int devices) {
  const auto latencies = hammer(fleet, per_thread, inputs, seconds);
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

/// Generated inputs of batch `batch` (the first dim of inputs whose first dim is dynamic).
std::vector<Tensor> inputs_of_batch(const std::vector<TensorSpec>& specs, int64_t batch) {
  ShapeOptions one;
  one.batches = {batch};
  return random_inputs(with_shapes(specs, resolve_shapes(specs, one, 1).front()), 7);
}

void check_batches(const std::vector<int64_t>& batches, const std::string& what, const char* example) {
  for (const auto b : batches) {
    if (b <= 0) throw Error(what + " must be positive (got " + std::to_string(b) + ")", std::string("Write them as ") + example);
  }
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
    bool ring;  // FleetOptions::request_ring: the fleet's workers take a ring or not
  };
  const std::vector<Way> ways = {{"worker round trip, identity batch 1, request ring", "request ring", Strategy::processes, true},
                                 {"worker round trip, identity batch 1, socket", "socket", Strategy::processes, false},
                                 {"in-process call, identity batch 1", "in process", Strategy::threads, true}};
  std::string note = fmt::format("round trip (identity model, batch 1, {}, host inputs):", device.to_string());
  for (const auto& way : ways) {
    if (o.progress) o.progress(fmt::format("{}, {:.0f} s", way.label, o.seconds));
    FleetOptions fo;
    fo.devices = {device};
    fo.strategy = way.strategy;
    fo.config = o.config;
    fo.ort_library = o.ort_library;
    fo.request_ring = way.ring;  // the fleet's own option: the environment is left alone (setenv races every getenv)
    Fleet fleet(model, fo);
    fleet.start();
    if (!fleet.wait()) throw Error("the identity model failed to start on " + device.to_string() + ": " + fleet.status().front().error);
    report.rows.push_back(measure(way.label, fleet, {device}, {random_inputs(fleet.inputs(), 7)}, o.seconds, 1));
    const auto& row = report.rows.back();
    note += fmt::format(" {} p50 {:.1f} us, p99 {:.1f} us;", way.short_name, row.p50_ms * 1000, row.p99_ms * 1000);
    if (way.strategy == Strategy::processes && way.ring) {
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
  if (device.is_cuda()) {
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
    row.error = device.is_cuda() ? detail::explain_anchor_failure(child.describe(), o.python) : child.describe();
  }
  return row;
}

ThroughputReport run_shape_mix(const ThroughputOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  check_batches(o.shape_mix, "batch sizes of a shape mix", "1,2 or 1,8,32");
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
  const bool shares_weights = detail::device_has(device, detail::Capability::weight_sharing, o.config);
  if (shares_weights) {
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
    report.notes.push_back(memory_note(aware_row, shares_weights ? " (weights shared)" : ""));
    if (shares_weights) report.notes.push_back(memory_note(report.rows[aware_index + 1], " (a copy of the weights each)"));
  }
  return report;
}

// --- scaling over devices and threads, in this process and in worker processes --------------------

/// What every call of a set of rows feeds the sessions: one batch size, in host memory or already on
/// the session's GPU.
struct Workload {
  int64_t batch = 0;
  bool on_device = false;
  std::vector<Tensor> host;  // the inputs, in host memory
  std::string text() const { return fmt::format("batch {}, {} inputs", batch, on_device ? "device" : "host"); }
};

std::vector<Workload> workloads_for(const ThroughputOptions& o, const std::vector<TensorSpec>& specs, bool gpus) {
  std::vector<Workload> out;
  const auto add = [&](int64_t batch, const std::vector<Tensor>& host) {
    out.push_back(Workload{batch, false, host});
    if (gpus) out.push_back(Workload{batch, true, host});
  };
  if (o.batches.empty()) {
    const auto host = random_inputs(specs, 7);
    const auto shaped = std::find_if(host.begin(), host.end(), [](const Tensor& t) { return !t.shape.empty(); });
    add(shaped != host.end() ? shaped->shape.front() : 1, host);
  }
  for (size_t i = 0; i < o.batches.size(); ++i) {
    const int64_t b = o.batches[i];
    if (std::find(o.batches.begin(), o.batches.begin() + static_cast<std::ptrdiff_t>(i), b) == o.batches.begin() + static_cast<std::ptrdiff_t>(i)) {
      add(b, inputs_of_batch(specs, b));
    }
  }
  return out;
}

/// The inputs of each thread: the workload's, or for device inputs a copy on each thread's GPU (one per GPU).
std::vector<std::vector<Tensor>> inputs_per_thread(const Workload& w, const std::vector<Device>& per_thread) {
  std::map<std::string, std::vector<Tensor>> on_device;
  std::vector<std::vector<Tensor>> out;
  for (const auto& d : per_thread) {
    if (!w.on_device) {
      out.push_back(w.host);
      continue;
    }
    auto& copies = on_device[d.to_string()];
    if (copies.empty()) {
      for (const auto& t : w.host) copies.push_back(copy_to_device(t, d));
    }
    out.push_back(copies);
  }
  return out;
}

/// One kind of scaling row: `threads` threads calling sessions on the first `devices` devices (more
/// threads than devices share the first device's session), in this process or in worker processes.
struct ScalingCase {
  int devices = 1;
  int threads = 1;
  bool workers = false;
  std::string label() const {
    if (devices == 1 && threads == 1) return fmt::format("1 device, 1 thread, {}", workers ? "a worker process" : "in this process");
    if (devices == 1) return fmt::format("1 device, {} threads on one session, in this process", threads);
    return fmt::format("{} devices, one session each, {}", devices, workers ? "a worker process each" : "in this process");
  }
};

/// "2 GPUs", "1 CPU device".
std::string device_count_text(int count, const Device& kind) {
  return fmt::format("{} {}{}", count, detail::device_has(kind, detail::Capability::device_memory) ? "GPU" : "CPU device", count == 1 ? "" : "s");
}

/// For each workload (batch, host or device inputs): one session on one device and its threads, then
/// one session on each device; on 1 and on N devices both in this process and in worker processes, with
/// the same session settings (the fleet's), so that the ratio is what the worker's data path costs.
ThroughputReport run_scaling(const ThroughputOptions& o) {
  const auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  check_batches(o.batches, "batch sizes", "1 or 1,32");
  ThroughputReport report;
  report.model = o.model;
  report.machine = detail::machine_description(o.devices);
  const Device first = o.devices.front();
  const int n = static_cast<int>(o.devices.size());
  const bool gpus = std::all_of(o.devices.begin(), o.devices.end(), [](const Device& d) { return detail::device_has(d, detail::Capability::device_memory); });
  std::vector<ScalingCase> cases = {{1, 1, false}, {1, 1, true}};
  if (n > 1) cases.insert(cases.end(), {{1, n, false}, {n, n, false}, {n, n, true}});

  std::vector<Workload> workloads;  // once the first fleet knows the model's inputs
  std::map<std::pair<size_t, size_t>, ThroughputRow> measured;  // (workload, case)
  for (const int devices : n > 1 ? std::vector<int>{1, n} : std::vector<int>{1}) {
    for (const bool workers : {false, true}) {
      FleetOptions fo;
      fo.devices.assign(o.devices.begin(), o.devices.begin() + devices);
      fo.strategy = workers ? Strategy::processes : Strategy::threads;
      fo.config = detail::tuned_for_fleet(o.config, first, devices);
      fo.ort_library = o.ort_library;
      const std::string where = workers ? "a worker process each" : "in this process";
      say(fmt::format("starting {} session{}, {}", devices, devices == 1 ? "" : "s", where));
      Fleet fleet(o.model, fo);
      fleet.start();
      if (!fleet.wait()) {
        for (const auto& st : fleet.status()) {
          if (st.state == DeviceState::failed) throw Error(fmt::format("a session {} failed on {}: {}", where, st.device.to_string(), st.error));
        }
      }
      if (workloads.empty()) workloads = workloads_for(o, fleet.inputs(), gpus);
      for (size_t w = 0; w < workloads.size(); ++w) {
        for (size_t c = 0; c < cases.size(); ++c) {
          const ScalingCase& sc = cases[c];
          if (sc.devices != devices || sc.workers != workers) continue;
          const std::string label = sc.label() + ", " + workloads[w].text();
          say(fmt::format("{}, {:.0f} s", label, o.seconds));
          const std::vector<Device> per_thread =
              sc.devices == 1 ? std::vector<Device>(static_cast<size_t>(sc.threads), first) : fo.devices;
          ThroughputRow row;
          const TransferCounters before = fleet.transfer_counters();
          try {
            row = measure(label, fleet, per_thread, inputs_per_thread(workloads[w], per_thread), o.seconds, sc.devices);
            const TransferCounters after = fleet.transfer_counters();
            row.ipc_bytes = after.inputs_ipc_bytes + after.outputs_ipc_bytes - before.inputs_ipc_bytes - before.outputs_ipc_bytes;
            row.host_bytes = after.inputs_host_bytes + after.outputs_host_bytes - before.inputs_host_bytes - before.outputs_host_bytes;
            row.staged_bytes =
                after.inputs_staged_bytes + after.outputs_staged_bytes - before.inputs_staged_bytes - before.outputs_staged_bytes;
          } catch (const std::exception& e) {
            row.label = label;
            row.devices = sc.devices;
            row.threads = sc.threads;
            row.error = Error::from(e).what();
          }
          row.batch = workloads[w].batch;
          row.inputs = workloads[w].on_device ? "device" : "host";
          measured[{w, c}] = row;
        }
      }
    }
  }
  if (!gpus) report.notes.push_back("not run: rows with inputs already on the device (the devices are not GPUs)");

  for (size_t w = 0; w < workloads.size(); ++w) {
    const ThroughputRow& base = measured.at({w, 0});  // 1 device, 1 thread, in this process
    for (size_t c = 0; c < cases.size(); ++c) {
      ThroughputRow row = measured.at({w, c});
      if (row.error.empty() && base.error.empty() && base.inferences_per_s > 0) row.speedup = row.inferences_per_s / base.inferences_per_s;
      if (cases[c].workers) {
        // The in-process row of the same devices: the case just before this one.
        const ThroughputRow& in_process = measured.at({w, c - 1});
        if (row.error.empty() && in_process.error.empty() && in_process.inferences_per_s > 0) {
          row.vs_in_process = row.inferences_per_s / in_process.inferences_per_s;
          report.notes.push_back(fmt::format("workers reach {:.2f}x in-process ({}, {}); {:.3g} MB crossed by CUDA IPC, {:.3g} MB through "
                                             "shared memory, {:.3g} MB of device tensors staged through host memory",
                                             row.vs_in_process, device_count_text(cases[c].devices, first), workloads[w].text(),
                                             static_cast<double>(row.ipc_bytes) / 1e6, static_cast<double>(row.host_bytes) / 1e6,
                                             static_cast<double>(row.staged_bytes) / 1e6));
        }
      }
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

}  // namespace

ThroughputReport run_throughput(const ThroughputOptions& options) {
  ThroughputOptions o = options;
  if (o.devices.empty()) o.devices = select_devices("all").devices;
  validate_model_file(o.model);
  load_runtime(o.ort_library);
  if (!o.shape_stream.empty()) return detail::run_shape_stream(o);
  if (!o.shape_mix.empty()) return run_shape_mix(o);
  ThroughputReport report = run_scaling(o);
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
                   {"batch", r.batch},
                   {"inputs", r.inputs},
                   {"vs_in_process", r.vs_in_process},
                   {"ipc_bytes", r.ipc_bytes},
                   {"host_bytes", r.host_bytes},
                   {"staged_bytes", r.staged_bytes},
                   {"stream_ms", r.stream_ms},
                   {"calls_ms", r.calls_ms},
                   {"error", r.error}});
  }
  return json{{"ortfleet_throughput", 1}, {"model", model}, {"machine", machine}, {"rows", out}, {"notes", notes}}.dump(2);
}

}  // namespace ortfleet
