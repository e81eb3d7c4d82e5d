#include "diagnostics/shape_stream.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "base/file_reading.hpp"
#include "base/private_dir.hpp"
#include "diagnostics/machine.hpp"
#include "diagnostics/python_anchor.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/shapes/buckets.hpp"
#include "engine/files/npy_file.hpp"
#include "engine/providers/provider_registry.hpp"
#include "engine/core/shape_grammar.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "engine/shapes/shapes.hpp"
#include "engine/session/tensor_padding.hpp"
#include "fleet/local/local_start.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/session.hpp"
#include "process/child_process.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {

/// A stream row: one Session made with `config`, ready, then every call of the stream timed.
struct StreamRun {
  ThroughputRow row;
  std::vector<double> ms;  // per call, round after round
  std::vector<std::map<std::string, double>> steady_p50_ms;  // of each `steady` shape, after each round
  std::vector<double> repeated_ms;  // each call of the stream run again thrice in a row, their median (buckets)
  BucketCallCosts bucket_calls;                 // where the stream's bucketed calls spent their time
};

double median_of(std::vector<double> v) { return v.empty() ? 0 : percentile(v, 50); }
double mean_of(const std::vector<double>& v) { return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

/// `ms`: the calls of `stream`, once or round after round (the stream's time is then a round's mean).
void fill_row(ThroughputRow& row, const std::vector<double>& ms, const std::vector<InputShapes>& stream) {
  row.devices = 1;
  row.threads = 1;
  const double total = std::accumulate(ms.begin(), ms.end(), 0.0);
  const double rounds = stream.empty() ? 1 : std::max(1.0, static_cast<double>(ms.size() / stream.size()));
  row.stream_ms = total / rounds;
  row.calls_ms = ms;
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

namespace {

/// "@FILE": a shape list per line, as it is ('#' starts a comment line).
std::vector<InputShapes> read_shape_stream_file(const std::string& path) {
  std::istringstream in(detail::read_whole_file(path, "the shape stream file", "Give a file with a shape list per line: x=1x3x480x640"));
  std::vector<InputShapes> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    for (auto& s : parse_shape_list(line)) out.push_back(std::move(s));
  }
  if (out.empty()) throw Error("the shape stream file " + path + " has no shapes", "Write a shape list per line: x=1x3x480x640");
  return out;
}

/// `count` calls drawn from `pattern` with `seed`: every dim of every input draws one of its sizes.
std::vector<InputShapes> draw_shape_stream(const ShapePattern& pattern, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<InputShapes> out;
  for (size_t i = 0; i < count; ++i) {
    InputShapes call;
    // New shapes while there are any left to draw (64 tries), as a stream of user images brings them.
    for (int attempt = 0; attempt < 64; ++attempt) {
      call.clear();
      for (const auto& [name, dims] : pattern) {
        auto& shape = call[name];
        for (const auto& sizes : dims) shape.push_back(sizes.at(rng() % sizes.count()));
      }
      if (!seen.count(to_string(call))) break;
    }
    seen.insert(to_string(call));
    out.push_back(call);
  }
  return out;
}

}  // namespace

std::vector<InputShapes> parse_shape_stream(const std::string& spec, size_t count, uint64_t seed) {
  if (!spec.empty() && spec.front() == '@') return read_shape_stream_file(spec.substr(1));
  if (count == 0) throw Error("a shape stream of no calls", "Give --stream-count 1 or more");
  return draw_shape_stream(parse_shape_pattern(spec), count, seed);
}

std::vector<DimBuckets> buckets_for_stream(const std::vector<InputShapes>& stream) {
  // What the shape policy would suggest for this stream.
  ShapeTraffic traffic;
  for (const auto& call : stream) traffic.note(to_string(call), call);
  return traffic.buckets();
}

namespace {

/// The buckets row: the run, and which bucket shape each call ran as.
struct BucketRun {
  StreamRun run;
  std::string label_buckets;                // "x.2=480,640,960 x.3=480,640,960"
  std::vector<InputShapes> shapes;          // those the stream ran padded to
  std::vector<std::string> shape_of_call;   // each call's ("" when it fits none)
};

/// onnxruntime's Python API with one session, on the same stream.
struct PythonRun {
  ThroughputRow row;
  double steady_ms = 0;  // its steady p50 on the stream's first shape
};

/// The rows of one stream bench on one device. They share the stream's inputs, made once from the
/// model's own inputs, and the warm-up file every row warms up on.
class StreamBench {
 public:
  StreamBench(const ThroughputOptions& o, const std::vector<InputShapes>& stream)
      : o_(o), device_(o.devices.front()), stream_(stream), scratch_(PrivateDir::temporary("ortfleet-stream")),
        warmup_file_((scratch_.path() / "warmup.npz").string()) {
    std::set<std::string> distinct;
    for (const auto& call : stream) distinct.insert(to_string(call));
    what_ = fmt::format("a stream of {} calls, {} distinct shapes", stream.size(), distinct.size());
  }

  const std::string& what() const { return what_; }
  const std::vector<InputShapes>& calls() const { return calls_; }
  void say(const std::string& s) const {
    if (o_.progress) o_.progress(s);
  }

  /// The inputs, from the model's own, through a session made with `one`; on a GPU, the stream once
  /// through that session, untimed: the process's first use of each kernel (lazy module loading,
  /// cuDNN's libraries) would otherwise fall on whichever row runs first. Throws what it throws.
  void prepare(const RunConfig& one) {
    Session probe(spec_for(one));
    make_inputs(probe.inputs());
    if (detail::device_has(device_, detail::Capability::kernel_search)) {
      say(fmt::format("priming: {}, untimed", what_));
      for (const auto& call : calls_) probe.run(inputs_.at(to_string(call)));
    }
  }

  /// One Session made with `config`, ready, then `rounds` times: every call of the stream timed, then
  /// the steady p50 of each of `steady`'s shapes; with `repeat_calls`, then each call again thrice in a
  /// row (what it costs when the call before ran on the same session).
  StreamRun run(const std::string& label, const RunConfig& config, const std::vector<InputShapes>& steady, int rounds = 1,
                bool repeat_calls = false) const {
    StreamRun run;
    run.row.label = label;
    try {
      SessionSpec spec = spec_for(config);
      spec.config.warmup.inputs_file = warmup_file_;
      Session session(spec);
      session.warm_up(1);
      for (int round = 0; round < rounds; ++round) {
        if (rounds > 1) say(fmt::format("{}: round {} of {}", label, round + 1, rounds));
        for (const auto& call : calls_) run.ms.push_back(timed_ms(session, inputs_.at(to_string(call))));
        auto& steady_now = run.steady_p50_ms.emplace_back();
        for (const auto& shape : steady) steady_now[to_string(shape)] = steady_p50_ms(session, shape);
      }
      run.bucket_calls = session.bucket_calls();
      for (size_t i = 0; repeat_calls && i < calls_.size(); ++i) {
        const auto& inputs = inputs_.at(to_string(calls_[i]));
        std::vector<double> again;
        for (int k = 0; k < 3; ++k) again.push_back(timed_ms(session, inputs));
        run.repeated_ms.push_back(median_of(again));
      }
      fill_row(run.row, run.ms, calls_);
      run.row.memory_bytes = session.memory_bytes();
      run.row.sessions = static_cast<int>(session.shape_sessions().size());
    } catch (const std::exception& e) {
      run.row.error = e.what();
    }
    return run;
  }

  /// The buckets as given, else those the shape policy suggests for the stream, with a session for
  /// every bucket shape; nullopt when there are none.
  std::optional<BucketRun> run_buckets() const {
    RunConfig bucketed = o_.config;
    if (bucketed.shapes.buckets.empty()) bucketed.shapes.buckets = buckets_for_stream(stream_);
    if (bucketed.shapes.buckets.empty()) return std::nullopt;
    BucketRun out;
    for (const auto& b : bucketed.shapes.buckets) out.label_buckets += (out.label_buckets.empty() ? "" : " ") + to_string(b);
    const BucketPlan plan(model_inputs_, bucketed.shapes, {});
    std::set<std::string> used;
    for (const auto& call : calls_) {
      const auto fit = plan.fit(call);
      out.shape_of_call.push_back(fit ? to_string(*fit) : "");
      if (fit && used.insert(to_string(*fit)).second) out.shapes.push_back(*fit);
    }
    size_t combinations = 1;
    for (const auto& b : bucketed.shapes.buckets) combinations *= b.sizes.size();
    bucketed.shapes.max_sessions = std::max(bucketed.shapes.max_sessions, static_cast<int>(std::min<size_t>(combinations, kMaxShapeSessions)));
    say(fmt::format("buckets {}, {}", out.label_buckets, what_));
    out.run = run(fmt::format("buckets {}, {}", out.label_buckets, what_), bucketed, out.shapes, std::max(1, o_.stream_rounds),
                  /*repeat_calls=*/true);
    return out;
  }

  /// onnxruntime's Python API (bench/anchors/onnxruntime_python.py) with the same settings, its row
  /// labelled with `when`; nullopt, and a note in `report` saying why, when it cannot run.
  std::optional<PythonRun> run_python(ThroughputReport& report, const std::string& when) const {
    const auto anchor = find_anchor_script();
    const auto problem = anchor ? anchor_problem(o_.python) : std::optional<std::string>("bench/anchors/onnxruntime_python.py not found");
    if (problem) {
      report.notes.push_back("not run: onnxruntime Python, one session: " + *problem);
      return std::nullopt;
    }
    say(fmt::format("onnxruntime's Python API, one session, {} ({})", what_, when));
    PythonRun out;
    out.row.label = fmt::format("python onnxruntime, one session, {} ({})", what_, when);
    json shapes = json::array();
    for (const auto& call : calls_) shapes.push_back(call);
    const std::string stream_file = (scratch_.path() / "stream.json").string();
    std::ofstream(stream_file) << shapes.dump();
    const RunConfig tuned = tuned_for_fleet(o_.config, device_, 1);
    std::vector<std::string> argv = {o_.python, *anchor, o_.model, "--devices", device_.to_string(), "--mode", "sequential",
                                     "--conv-algo", to_string(o_.config.cuda.conv_algo_search), "--shape-stream", stream_file,
                                     "--intra-threads", std::to_string(tuned.session.intra_op_threads)};
    if (!tuned.session.thread_spinning) argv.push_back("--no-spinning");
    if (device_.is_cuda()) {
      if (auto ep = find_cuda_ep()) argv.insert(argv.end(), {"--cuda-ep", ep->path});
    }
    const auto child = run_child(argv, {}, "{", 600 + 10.0 * static_cast<double>(calls_.size()));
    try {
      const auto j = json::parse(child.report_line);
      fill_row(out.row, j.at("ms").get<std::vector<double>>(), calls_);
      out.steady_ms = j.at("steady_p50_ms").get<double>();
      out.row.sessions = 1;
    } catch (const std::exception&) {
      out.row.error = device_.is_cuda() ? explain_anchor_failure(child.describe(), o_.python) : child.describe();
    }
    return out;
  }

 private:
  SessionSpec spec_for(const RunConfig& config) const {
    SessionSpec spec;
    spec.model_path = o_.model;
    spec.device = device_;
    spec.config = tuned_for_fleet(config, device_, 1);
    return spec;
  }

  /// Every call's shapes completed from the model's inputs, and one set of inputs per signature;
  /// the warm-up file holds the stream's first shape, as a user's warm-up call would.
  void make_inputs(const std::vector<TensorSpec>& specs) {
    model_inputs_ = specs;
    for (const auto& call : stream_) {
      InputShapes complete = complete_shapes(specs, call, 1);
      check_shapes(specs, complete);
      const std::string signature = to_string(complete);
      if (!inputs_.count(signature)) {
        inputs_[signature] = random_inputs(with_shapes(specs, complete), 7 + inputs_.size(), 1, o_.config.warmup.input_ranges);
      }
      calls_.push_back(std::move(complete));
    }
    write_npz(warmup_file_, inputs_.at(to_string(calls_.front())));
  }

  static double timed_ms(Session& session, const std::vector<Tensor>& inputs) {
    const int64_t start = monotonic_ns();
    session.run(inputs);
    return static_cast<double>(monotonic_ns() - start) / 1e6;
  }

  /// The p50 of 30 calls of `shape` after one untimed call.
  double steady_p50_ms(Session& session, const InputShapes& shape) const {
    const auto made = random_inputs(with_shapes(model_inputs_, shape), 3, 1, o_.config.warmup.input_ranges);
    session.run(made);
    std::vector<double> ms;
    for (int i = 0; i < 30; ++i) ms.push_back(timed_ms(session, made));
    return median_of(ms);
  }

  const ThroughputOptions& o_;
  const Device device_;
  const std::vector<InputShapes>& stream_;
  PrivateDir scratch_;
  std::string warmup_file_;
  std::string what_;
  std::vector<TensorSpec> model_inputs_;
  std::map<std::string, std::vector<Tensor>> inputs_;  // by signature, made once every row feeds them
  std::vector<InputShapes> calls_;                     // the stream, every input's shape complete
};

std::string times(double ratio) {
  return ratio >= 1 ? fmt::format("{:.2f}x slower than", ratio) : fmt::format("{:.2f}x faster than", 1 / ratio);
}

/// The buckets row against the steady calls of its bucket shapes: each call's reference is its bucket
/// shape's steady p50 of the same round (a call no bucket fits: its own time). The p50 ratio is each
/// round's (median, min, max); the p99 is set beside the references' own p99, the spread the shapes
/// alone make (a stream of large and small images has one).
void add_bucket_ratio_notes(ThroughputReport& report, const BucketRun& buckets, const StreamRun& one) {
  const StreamRun& bucketed = buckets.run;
  const size_t n = buckets.shape_of_call.size();
  std::vector<double> ratios;
  std::vector<double> references;  // every call's, over the rounds
  for (size_t round = 0; round < bucketed.steady_p50_ms.size() && n > 0 && (round + 1) * n <= bucketed.ms.size(); ++round) {
    const std::vector<double> calls(bucketed.ms.begin() + static_cast<std::ptrdiff_t>(round * n),
                                    bucketed.ms.begin() + static_cast<std::ptrdiff_t>((round + 1) * n));
    std::vector<double> steady;
    for (size_t i = 0; i < n; ++i) {
      const auto it = bucketed.steady_p50_ms[round].find(buckets.shape_of_call[i]);
      steady.push_back(it != bucketed.steady_p50_ms[round].end() ? it->second : calls[i]);
    }
    ratios.push_back(percentile(calls, 50) / percentile(steady, 50));
    references.insert(references.end(), steady.begin(), steady.end());
  }
  if (ratios.empty()) return;
  const double reference_p50 = percentile(references, 50);
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  const std::string spread = ratios.size() > 1 ? fmt::format(" (each of {} rounds: {:.2f}x to {:.2f}x)", ratios.size(), *low, *high) : "";
  report.notes.push_back(fmt::format("buckets {}: the stream's p50 {:.3g} ms is {:.2f}x{} the steady p50 of the bucket shapes its calls ran as "
                                     "({:.3g} ms, {} shapes); a stream took {:.0f} ms, {} one session",
                                     buckets.label_buckets, bucketed.row.p50_ms, percentile(ratios, 50), spread, reference_p50,
                                     buckets.shapes.size(), bucketed.row.stream_ms, times(bucketed.row.stream_ms / one.row.stream_ms)));
  if (!bucketed.repeated_ms.empty()) {
    // A stream moves from one bucket's session to another's at almost every call; a steady call
    // repeats one. The stream's calls repeated in a row part the two: what switching costs, what
    // padding does.
    const double repeated_p50 = percentile(bucketed.repeated_ms, 50);
    report.notes.push_back(fmt::format("buckets: the stream's calls, each repeated in a row (no move to another bucket's session between "
                                       "them): p50 {:.3g} ms. Moving between sessions makes the stream's p50 {:.2f}x that; padding and "
                                       "cropping make it {:.2f}x the steady p50 of the bucket shapes",
                                       repeated_p50, bucketed.row.p50_ms / repeated_p50, repeated_p50 / reference_p50));
  }
  const double reference_p99 = percentile(references, 99);
  report.notes.push_back(fmt::format("buckets: the stream's p99 {:.3g} ms is {:.2f}x its p50; the steady calls of its bucket shapes alone: p99 "
                                     "{:.3g} ms, {:.2f}x their p50; the stream's p99 is {:.2f}x theirs",
                                     bucketed.row.p99_ms, bucketed.row.p99_ms / bucketed.row.p50_ms, reference_p99, reference_p99 / reference_p50,
                                     bucketed.row.p99_ms / reference_p99));
}

/// One ortfleet session against onnxruntime's Python API, run before ortfleet's rows and after them:
/// over a bench of minutes a shared GPU's clocks drift, and the mean of the two brackets ortfleet's.
void add_python_notes(ThroughputReport& report, const std::vector<InputShapes>& calls, const StreamRun& one, const StreamRun& policy,
                      const std::vector<PythonRun>& python) {
  std::vector<double> streams;
  std::vector<double> steadies;
  for (const auto& p : python) {
    if (!p.row.error.empty() || p.row.stream_ms <= 0) continue;
    streams.push_back(p.row.stream_ms);
    if (p.steady_ms > 0) steadies.push_back(p.steady_ms);
  }
  if (streams.empty()) return;
  const auto listed = [](const std::vector<double>& v, const char* format) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + fmt::format(fmt::runtime(format), v[i]);
    return v.size() > 1 ? out + " (before and after ortfleet's rows)" : out;
  };
  const double stream = mean_of(streams);
  report.notes.push_back(fmt::format("onnxruntime Python, one session: the stream took {}; one ortfleet session ({:.0f} ms) is {} {}",
                                     listed(streams, "{:.0f} ms"), one.row.stream_ms, times(one.row.stream_ms / stream),
                                     streams.size() > 1 ? "their mean" : "it"));
  const std::map<std::string, double> none;
  const auto& policy_steady = policy.steady_p50_ms.empty() ? none : policy.steady_p50_ms.front();
  const auto ours = policy_steady.find(to_string(calls.front()));
  if (steadies.empty() || ours == policy_steady.end()) return;
  const double steady = mean_of(steadies);
  // The larger over the smaller, so that two decimals say it (a tenth of a millisecond against 3 read "0.01x").
  const bool faster = ours->second <= steady;
  report.notes.push_back(fmt::format("call overhead: a steady call of {} takes {:.3g} ms in an ortfleet session in this process and {} in "
                                     "onnxruntime's Python API with the same settings: {:.2f}x {} {}",
                                     ours->first, ours->second, listed(steadies, "{:.3g} ms"), faster ? steady / ours->second : ours->second / steady,
                                     faster ? "faster than" : "the time of", steadies.size() > 1 ? "their mean" : "it"));
}

/// The ratios the rows stand for: each way against one session, the buckets against their shapes'
/// steady calls, one session against onnxruntime's Python API, and the call overhead.
void add_notes(ThroughputReport& report, const std::vector<InputShapes>& calls, const StreamRun& one, const StreamRun& policy,
               const std::optional<BucketRun>& buckets, const std::vector<PythonRun>& python) {
  for (auto& r : report.rows) r.speedup = r.stream_ms > 0 && one.row.stream_ms > 0 ? one.row.stream_ms / r.stream_ms : 0;
  if (policy.row.error.empty()) {
    report.notes.push_back(fmt::format("default policy: the stream took {:.0f} ms, {} one session ({:.0f} ms); {} at the end",
                                       policy.row.stream_ms, times(policy.row.stream_ms / one.row.stream_ms), one.row.stream_ms,
                                       count_text(static_cast<uint64_t>(policy.row.sessions), "session")));
  }
  if (buckets && !buckets->shapes.empty() && buckets->run.row.error.empty() && !buckets->run.steady_p50_ms.empty()) {
    const StreamRun& bucketed = buckets->run;
    add_bucket_ratio_notes(report, *buckets, one);
    if (const BucketCallCosts& c = bucketed.bucket_calls; c.calls > 0) {
      const double n = static_cast<double>(c.calls);
      report.notes.push_back(fmt::format("a padded call's time, on average over {} calls: padding the inputs {:.3g} ms (the copy in {:.3g}), "
                                         "the bucket shape's run {:.3g} ms, cropping the outputs {:.3g} ms (the copy down {:.3g})",
                                         c.calls, c.pad_ms / n, c.upload_ms / n, c.run_ms / n, c.crop_ms / n, c.copy_down_ms / n));
      const BucketCallTime& slow = c.slowest;
      report.notes.push_back(fmt::format("the slowest padded call ({:.3g} ms, padded to {}{}): padding {:.3g} ms (the copy in {:.3g}), run {:.3g} ms, "
                                         "cropping {:.3g} ms (the copy down {:.3g})",
                                         slow.total_ms(), slow.bucket, slow.bucket_first ? ", that bucket's first call" : "", slow.pad_ms,
                                         slow.upload_ms, slow.run_ms, slow.crop_ms, slow.copy_down_ms));
    }
  }
  add_python_notes(report, calls, one, policy, python);
}

}  // namespace

ThroughputReport run_shape_stream(const ThroughputOptions& o) {
  const auto stream = parse_shape_stream(o.shape_stream, static_cast<size_t>(o.stream_count), o.stream_seed);
  ThroughputReport report;
  report.model = o.model;
  report.machine = machine_description({o.devices.front()});
  StreamBench bench(o, stream);
  const std::string& what = bench.what();

  // One ONNX Runtime session for every shape, as ONNX Runtime alone serves them.
  RunConfig one = o.config;
  one.shapes = ShapeOptions{};
  one.shapes.max_sessions = 1;
  one.shapes.policy = ShapePolicy::shared;
  try {
    bench.prepare(one);
  } catch (const std::exception& e) {
    ThroughputRow failed;
    failed.label = fmt::format("one session, {}", what);
    failed.error = e.what();
    report.rows.push_back(failed);
    return report;
  }
  // onnxruntime's Python API runs before ortfleet's rows and after them (add_python_notes).
  std::vector<PythonRun> python;
  const int64_t python_begin = monotonic_ns();
  if (o.anchors) {
    if (auto before = bench.run_python(report, "before ortfleet's rows")) python.push_back(std::move(*before));
  }
  const double python_s = static_cast<double>(monotonic_ns() - python_begin) / 1e9;
  bench.say(fmt::format("one ONNX Runtime session, {}", what));
  // Its steady p50 on the stream's first shape is the in-process call overhead's measure.
  const int64_t one_begin = monotonic_ns();
  const StreamRun one_run = bench.run(fmt::format("one session, {}", what), one, {});
  report.rows.push_back(one_run.row);
  if (o.notice && one_run.row.error.empty()) {
    // The rows to come run the same stream: the default policy once, the buckets each round, and
    // Python again where it ran before: each about as long as this one (a bucket round less).
    const double one_s = static_cast<double>(monotonic_ns() - one_begin) / 1e9;
    const double rest_s = one_s * (1 + o.stream_rounds) + (python.empty() ? 0.0 : python_s);
    o.notice(fmt::format("the stream through one session took {}: the default policy, {} of buckets{} take about {} more",
                         duration_text(one_s * 1e3), count_text(static_cast<uint64_t>(o.stream_rounds), "round"),
                         python.empty() ? "" : " and Python's API again", duration_text(rest_s * 1e3)));
  }
  if (!one_run.row.error.empty()) {
    for (const auto& p : python) report.rows.push_back(p.row);
    return report;
  }

  // The buckets run before the default policy, though their row comes after it: their session checks
  // that padding keeps the model's outputs, and where it does not, the default policy's advice (a
  // stream past its sessions) says so instead of advising buckets.
  const std::optional<BucketRun> bucket_run = bench.run_buckets();
  if (bucket_run && !bucket_run->run.row.error.empty()) {
    if (const auto refused = padding_refusal(o.model)) {
      report.notes.push_back("no buckets advised: padding changes this model's outputs (" + *refused + "); declare the shapes you feed instead");
    }
  }

  bench.say(fmt::format("ortfleet's default shape policy, {}", what));
  RunConfig policy = o.config;
  policy.shapes.buckets.clear();
  const StreamRun policy_run =
      bench.run(fmt::format("default policy ({}), {}", to_string(policy.shapes.policy), what), policy, {bench.calls().front()});
  report.rows.push_back(policy_run.row);
  if (bucket_run) report.rows.push_back(bucket_run->run.row);

  if (!python.empty() && python.front().row.error.empty()) {
    if (auto after = bench.run_python(report, "after ortfleet's rows")) python.push_back(std::move(*after));
  }
  for (const auto& p : python) report.rows.push_back(p.row);

  add_notes(report, bench.calls(), one_run, policy_run, bucket_run, python);
  return report;
}

}  // namespace ortfleet::detail
