#include "diagnostics/shape_stream.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "base/private_dir.hpp"
#include "diagnostics/machine.hpp"
#include "diagnostics/python_anchor.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/shapes/buckets.hpp"
#include "engine/files/npy_file.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "engine/shapes/shapes.hpp"
#include "engine/shapes/tensor_padding.hpp"
#include "fleet/local_start.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/session.hpp"
#include "process/child_process.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {

constexpr const char* kStreamHint =
    "Write a stream as x=1x3x[320:960:32]x[320:960:32] (a bracketed dim is drawn from first:last:step), or @FILE with a shape per line";

/// One dim of a stream spec: a fixed size (lo == hi) or a range drawn from.
struct DimDraw {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t step = 1;
};

int64_t whole(const std::string& text, const std::string& item) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v <= 0) throw Error("'" + text + "' in '" + item + "' is not a positive whole number", kStreamHint);
  return v;
}

std::map<std::string, std::vector<DimDraw>> parse_draws(const std::string& spec) {
  std::map<std::string, std::vector<DimDraw>> out;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) throw Error("'" + item + "' is not name=dims", kStreamHint);
    std::vector<DimDraw> dims;
    std::stringstream parts(item.substr(eq + 1));
    for (std::string d; std::getline(parts, d, 'x');) {
      if (d.size() > 2 && d.front() == '[' && d.back() == ']') {
        std::vector<int64_t> v;
        std::stringstream range(d.substr(1, d.size() - 2));
        for (std::string r; std::getline(range, r, ':');) v.push_back(whole(r, item));
        if (v.size() != 3 || v[0] > v[1]) throw Error("'" + d + "' in '" + item + "' is not [first:last:step]", kStreamHint);
        dims.push_back({v[0], v[1], v[2]});
      } else {
        const int64_t n = whole(d, item);
        dims.push_back({n, n, 1});
      }
    }
    out[item.substr(0, eq)] = dims;
  }
  if (out.empty()) throw Error("an empty shape stream", kStreamHint);
  return out;
}

/// A stream row: one Session made with `config`, ready, then every call of the stream timed.
struct StreamRun {
  ThroughputRow row;
  std::vector<double> ms;  // per call
  std::map<std::string, double> steady_p50_ms;  // of each `steady` shape, after the stream
};

double median_of(std::vector<double> v) { return v.empty() ? 0 : percentile(v, 50); }

void fill_row(ThroughputRow& row, const std::vector<double>& ms, const std::vector<InputShapes>& stream) {
  row.devices = 1;
  row.threads = 1;
  const double total = std::accumulate(ms.begin(), ms.end(), 0.0);
  row.stream_ms = total;
  row.inferences_per_s = total > 0 ? 1000.0 * static_cast<double>(ms.size()) / total : 0;
  row.p50_ms = percentile(ms, 50);
  row.p99_ms = percentile(ms, 99);
  // First calls: the median of each shape's first call in the stream.
  std::set<std::string> seen;
  std::vector<double> first;
  for (size_t i = 0; i < ms.size() && i < stream.size(); ++i) {
    if (seen.insert(to_string(stream[i])).second) first.push_back(ms[i]);
  }
  row.first_call_ms = median_of(first);
}

}  // namespace

std::vector<InputShapes> parse_shape_stream(const std::string& spec, size_t count, uint64_t seed) {
  std::vector<InputShapes> out;
  if (!spec.empty() && spec.front() == '@') {
    std::ifstream in(spec.substr(1));
    if (!in) throw Error("cannot read the shape stream file " + spec.substr(1), "Give a file with a shape list per line: x=1x3x480x640");
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line.front() == '#') continue;
      for (auto& s : parse_shape_list(line)) out.push_back(std::move(s));
    }
    if (out.empty()) throw Error("the shape stream file " + spec.substr(1) + " has no shapes", "Write a shape list per line: x=1x3x480x640");
    return out;
  }
  if (count == 0) throw Error("a shape stream of no calls", "Give --stream-count 1 or more");
  const auto draws = parse_draws(spec);
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  for (size_t i = 0; i < count; ++i) {
    InputShapes call;
    // New shapes while there are any left to draw (64 tries), as a stream of user images brings them.
    for (int attempt = 0; attempt < 64; ++attempt) {
      call.clear();
      for (const auto& [name, dims] : draws) {
        auto& shape = call[name];
        for (const auto& d : dims) {
          const int64_t choices = (d.hi - d.lo) / d.step + 1;
          shape.push_back(d.lo + d.step * static_cast<int64_t>(rng() % static_cast<uint64_t>(choices)));
        }
      }
      if (!seen.count(to_string(call))) break;
    }
    seen.insert(to_string(call));
    out.push_back(call);
  }
  return out;
}

std::vector<DimBuckets> buckets_for_stream(const std::vector<InputShapes>& stream) {
  // What the shape policy would suggest for this stream.
  ShapeTraffic traffic;
  for (const auto& call : stream) traffic.note(to_string(call), call);
  return traffic.buckets();
}

ThroughputReport run_shape_stream(const ThroughputOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const Device device = o.devices.front();
  const auto stream = parse_shape_stream(o.shape_stream, static_cast<size_t>(o.stream_count), o.stream_seed);
  ThroughputReport report;
  report.model = o.model;
  report.machine = machine_description({device});
  std::set<std::string> distinct;
  for (const auto& call : stream) distinct.insert(to_string(call));
  const std::string what = fmt::format("a stream of {} calls, {} distinct shapes", stream.size(), distinct.size());

  const auto scratch = PrivateDir::temporary("ortfleet-stream");
  const std::string warmup_file = (scratch.path() / "warmup.npz").string();
  std::vector<TensorSpec> model_inputs;
  std::map<std::string, std::vector<Tensor>> inputs;  // by signature, made once every row feeds them
  std::vector<InputShapes> calls;                     // the stream, every input's shape complete
  auto prepare_inputs = [&](const std::vector<TensorSpec>& specs) {
    model_inputs = specs;
    for (const auto& call : stream) {
      InputShapes complete = complete_shapes(specs, call, 1);
      check_shapes(specs, complete);
      const std::string signature = to_string(complete);
      if (!inputs.count(signature)) {
        inputs[signature] = random_inputs(with_shapes(specs, complete), 7 + inputs.size(), 1, o.config.warmup.input_ranges);
      }
      calls.push_back(std::move(complete));
    }
    // Every row warms up on the stream's first shape, as a user's warm-up call would.
    write_npz(warmup_file, inputs.at(to_string(calls.front())));
  };

  auto run_row = [&](const std::string& label, RunConfig config, const std::vector<InputShapes>& steady) {
    StreamRun run;
    run.row.label = label;
    try {
      SessionSpec spec;
      spec.model_path = o.model;
      spec.device = device;
      spec.config = tuned_for_fleet(config, device, 1);
      spec.config.warmup.inputs_file = warmup_file;
      Session session(spec);
      session.warm_up(1);
      for (const auto& call : calls) {
        const auto& in = inputs.at(to_string(call));
        const int64_t start = monotonic_ns();
        session.run(in);
        run.ms.push_back(static_cast<double>(monotonic_ns() - start) / 1e6);
      }
      fill_row(run.row, run.ms, calls);
      run.row.memory_bytes = session.memory_bytes();
      run.row.sessions = static_cast<int>(session.shape_sessions().size());
      for (const auto& shape : steady) {
        const auto made = random_inputs(with_shapes(model_inputs, shape), 3, 1, o.config.warmup.input_ranges);
        session.run(made);
        std::vector<double> steady_ms;
        for (int i = 0; i < 30; ++i) {
          const int64_t start = monotonic_ns();
          session.run(made);
          steady_ms.push_back(static_cast<double>(monotonic_ns() - start) / 1e6);
        }
        run.steady_p50_ms[to_string(shape)] = median_of(steady_ms);
      }
    } catch (const std::exception& e) {
      run.row.error = e.what();
    }
    return run;
  };

  RunConfig one = o.config;
  one.shapes = ShapeOptions{};
  one.shapes.max_sessions = 1;
  one.shapes.policy = ShapePolicy::shared;
  try {
    // The inputs, from the model's own inputs; on a GPU, the stream once through a session of its
    // own, untimed: the process's first use of each kernel (lazy module loading, cuDNN's libraries)
    // would otherwise fall on whichever row runs first.
    SessionSpec spec;
    spec.model_path = o.model;
    spec.device = device;
    spec.config = tuned_for_fleet(one, device, 1);
    Session probe(spec);
    prepare_inputs(probe.inputs());
    if (device.is_gpu()) {
      say(fmt::format("priming: {}, untimed", what));
      for (const auto& call : calls) probe.run(inputs.at(to_string(call)));
    }
  } catch (const std::exception& e) {
    ThroughputRow failed;
    failed.label = fmt::format("one session, {}", what);
    failed.error = e.what();
    report.rows.push_back(failed);
    return report;
  }
  say(fmt::format("one ONNX Runtime session, {}", what));
  // Its steady p50 on the stream's first shape is the in-process call overhead's measure.
  const StreamRun one_run = run_row(fmt::format("one session, {}", what), one, {});
  report.rows.push_back(one_run.row);
  if (!one_run.row.error.empty()) return report;

  say(fmt::format("ortfleet's default shape policy, {}", what));
  RunConfig policy = o.config;
  policy.shapes.buckets.clear();
  const StreamRun policy_run = run_row(fmt::format("default policy ({}), {}", to_string(policy.shapes.policy), what), policy, {calls.front()});
  report.rows.push_back(policy_run.row);

  RunConfig bucketed = o.config;
  if (bucketed.shapes.buckets.empty()) bucketed.shapes.buckets = buckets_for_stream(stream);
  std::string bucket_text;
  for (const auto& b : bucketed.shapes.buckets) bucket_text += (bucket_text.empty() ? "" : " ") + to_string(b);
  StreamRun bucket_run;
  std::vector<InputShapes> bucket_shapes;  // those the stream ran padded to
  std::vector<std::string> bucket_of_call;  // each call's ("" when it fits none)
  if (!bucketed.shapes.buckets.empty()) {
    const BucketPlan plan(model_inputs, bucketed.shapes, {});
    std::set<std::string> used;
    for (const auto& call : calls) {
      const auto fit = plan.fit(call);
      bucket_of_call.push_back(fit ? to_string(*fit) : "");
      if (fit && used.insert(to_string(*fit)).second) bucket_shapes.push_back(*fit);
    }
    size_t combinations = 1;
    for (const auto& b : bucketed.shapes.buckets) combinations *= b.sizes.size();
    bucketed.shapes.max_sessions = std::max(bucketed.shapes.max_sessions, static_cast<int>(std::min<size_t>(combinations, kMaxShapeSessions)));
    say(fmt::format("buckets {}, {}", bucket_text, what));
    bucket_run = run_row(fmt::format("buckets {}, {}", bucket_text, what), bucketed, bucket_shapes);
    report.rows.push_back(bucket_run.row);
  }

  ThroughputRow python;
  python.label = fmt::format("python onnxruntime, one session, {}", what);
  double python_steady_ms = 0;
  if (o.anchors) {
    const auto anchor = find_anchor_script();
    const auto problem = anchor ? anchor_problem(o.python) : std::optional<std::string>("bench/anchors/onnxruntime_python.py not found");
    if (problem) {
      report.notes.push_back("not run: onnxruntime Python, one session: " + *problem);
    } else {
      say(fmt::format("onnxruntime's Python API, one session, {}", what));
      json shapes = json::array();
      for (const auto& call : calls) shapes.push_back(call);
      const std::string stream_file = (scratch.path() / "stream.json").string();
      std::ofstream(stream_file) << shapes.dump();
      const RunConfig tuned = tuned_for_fleet(o.config, device, 1);
      std::vector<std::string> argv = {o.python, *anchor, o.model, "--devices", device.to_string(), "--mode", "sequential",
                                       "--conv-algo", to_string(o.config.cuda.conv_algo_search), "--shape-stream", stream_file,
                                       "--intra-threads", std::to_string(tuned.session.intra_op_threads)};
      if (!tuned.session.thread_spinning) argv.push_back("--no-spinning");
      if (device.is_gpu()) {
        if (auto ep = find_cuda_ep()) argv.insert(argv.end(), {"--cuda-ep", ep->path});
      }
      const auto child = run_child(argv, {}, "{", 600 + 10.0 * static_cast<double>(calls.size()));
      try {
        const auto j = json::parse(child.report_line);
        std::vector<double> ms = j.at("ms").get<std::vector<double>>();
        fill_row(python, ms, calls);
        python_steady_ms = j.at("steady_p50_ms").get<double>();
        python.sessions = 1;
      } catch (const std::exception&) {
        python.error = device.is_gpu() ? explain_anchor_failure(child.describe(), o.python) : child.describe();
      }
      report.rows.push_back(python);
    }
  }

  for (auto& r : report.rows) r.speedup = r.stream_ms > 0 && one_run.row.stream_ms > 0 ? one_run.row.stream_ms / r.stream_ms : 0;
  auto times = [](double ratio) { return ratio >= 1 ? fmt::format("{:.2f}x slower than", ratio) : fmt::format("{:.2f}x faster than", 1 / ratio); };
  if (policy_run.row.error.empty()) {
    report.notes.push_back(fmt::format("default policy: the stream took {:.0f} ms, {} one session ({:.0f} ms); {} sessions at the end",
                                       policy_run.row.stream_ms, times(policy_run.row.stream_ms / one_run.row.stream_ms),
                                       one_run.row.stream_ms, policy_run.row.sessions));
  }
  if (!bucket_shapes.empty() && bucket_run.row.error.empty() && !bucket_run.steady_p50_ms.empty()) {
    // The steady reference of each call: its bucket shape's steady p50 (a call no bucket fits: its own time).
    std::vector<double> steady;
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto it = bucket_run.steady_p50_ms.find(bucket_of_call[i]);
      steady.push_back(it != bucket_run.steady_p50_ms.end() ? it->second : bucket_run.ms[i]);
    }
    const double steady_p50 = percentile(steady, 50);
    report.notes.push_back(fmt::format("buckets {}: the stream's p50 {:.3g} ms is {:.2f}x the steady p50 of the bucket shapes its calls ran as "
                                       "({:.3g} ms, {} shapes); the stream took {:.0f} ms, {} one session",
                                       bucket_text, bucket_run.row.p50_ms, bucket_run.row.p50_ms / steady_p50, steady_p50,
                                       bucket_shapes.size(), bucket_run.row.stream_ms, times(bucket_run.row.stream_ms / one_run.row.stream_ms)));
  }
  if (python.error.empty() && python.stream_ms > 0) {
    report.notes.push_back(fmt::format("onnxruntime Python, one session: the stream took {:.0f} ms; one ortfleet session is {} it",
                                       python.stream_ms, times(one_run.row.stream_ms / python.stream_ms)));
    const auto ours = policy_run.steady_p50_ms.find(to_string(calls.front()));
    if (python_steady_ms > 0 && ours != policy_run.steady_p50_ms.end()) {
      report.notes.push_back(fmt::format("call overhead: a steady call of {} takes {:.3g} ms in an ortfleet session in this process and "
                                         "{:.3g} ms in onnxruntime's Python API with the same settings: {:.3f}x",
                                         ours->first, ours->second, python_steady_ms, ours->second / python_steady_ms));
    }
  }
  return report;
}

}  // namespace ortfleet::detail
