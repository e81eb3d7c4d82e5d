#include "engine/shapes/shape_policy.hpp"
#include "ortfleet/diagnostics/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "diagnostics/cold_start.hpp"
#include "diagnostics/round_budget.hpp"
#include "process/child_process.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/fleet/fleet.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<TuneCandidate> default_sweep(const Device& device, const RunConfig& base, bool quick) {
  std::vector<TuneCandidate> out;
  auto add = [&](const std::string& name, auto change) {
    RunConfig c = base;
    change(c);
    c.name = name;
    out.push_back({name, c, {}});
  };
  add("as given", [](RunConfig&) {});
  if (device.is_cuda()) {
    add("conv=HEURISTIC", [](RunConfig& c) { c.cuda.conv_algo_search = ConvAlgoSearch::heuristic; });
    add("conv=DEFAULT", [](RunConfig& c) { c.cuda.conv_algo_search = ConvAlgoSearch::default_algo; });
  }
  add("model cache", [](RunConfig& c) { c.session.optimized_model_cache = true; });
  if (device.is_cuda()) {
    add("conv=HEURISTIC + model cache", [](RunConfig& c) {
      c.cuda.conv_algo_search = ConvAlgoSearch::heuristic;
      c.session.optimized_model_cache = true;
    });
  }
  add("graph opt basic", [](RunConfig& c) { c.session.graph_optimization = GraphOptimization::basic; });
  if (quick) return out;
  add("graph opt disabled", [](RunConfig& c) { c.session.graph_optimization = GraphOptimization::disabled; });
  add("graph opt extended", [](RunConfig& c) { c.session.graph_optimization = GraphOptimization::extended; });
  add("memory pattern off", [](RunConfig& c) { c.session.memory_pattern = false; });
  add("intra-op 1 thread, no spinning", [](RunConfig& c) {
    c.session.intra_op_threads = 1;
    c.session.thread_spinning = false;
  });
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!detail::device_has(device, detail::Capability::device_memory) && cores > 2) {
    add(fmt::format("intra-op {} threads", cores / 2), [cores](RunConfig& c) { c.session.intra_op_threads = cores / 2; });
  }
  if (device.is_cuda()) {
    add("max workspace off", [](RunConfig& c) { c.cuda.conv_use_max_workspace = false; });
    add("arena same_as_requested", [](RunConfig& c) { c.cuda.arena_extend = ArenaExtendStrategy::same_as_requested; });
    add("tf32 off", [](RunConfig& c) { c.cuda.tf32 = false; });
    add("cuda graph", [](RunConfig& c) { c.cuda.cuda_graph = true; });
    add("CUDA_MODULE_LOADING=EAGER", [](RunConfig& c) { c.session.cuda_module_loading = "EAGER"; });
    add("CUDA_DEVICE_MAX_CONNECTIONS=1", [](RunConfig& c) { c.session.cuda_max_connections = 1; });
  } else {
    add("cpu arena off", [](RunConfig& c) { c.session.cpu_arena = false; });
  }
  return out;
}

TransformerCosts transformer_costs(const std::vector<std::vector<std::pair<std::string, double>>>& starts, int count) {
  // Each transformer's times over the starts (0 in a start whose log does not name it).
  std::map<std::string, std::vector<double>> times;
  for (size_t s = 0; s < starts.size(); ++s) {
    for (const auto& [name, ms] : starts[s]) {
      auto& t = times[name];
      t.resize(starts.size(), 0.0);
      t[s] += ms;
    }
  }
  TransformerCosts out;
  for (auto& [name, t] : times) {
    t.resize(starts.size(), 0.0);
    out.medians.emplace_back(name, summarize(t).median);
  }
  std::stable_sort(out.medians.begin(), out.medians.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::pair<std::string, double>> costing;  // those that took any time
  for (const auto& m : out.medians) {
    if (m.second > 0) costing.push_back(m);
  }
  const size_t wanted = std::min(costing.size(), static_cast<size_t>(std::max(0, count)));
  // The largest k <= count whose members each took longer than any other transformer, start for start
  // in the range each keeps over the starts: ranges apart, so that another run's starts, however they
  // fall, rank the same set first. A range leaves out each transformer's highest and lowest time (five
  // starts or more), and any time 4 times off its median: preemptions, not its cost (a transformer of
  // 0.05 ms took 12 ms in one start; one of 0.07 ms took 0.12 ms in two of ten).
  std::map<std::string, std::pair<double, double>> range;  // low, high over the starts, as above
  for (const auto& [name, t] : times) {
    const double median = summarize(t).median;
    std::vector<double> kept;
    for (const double x : t) {
      if (starts.size() < 3 || median <= 0 || (x <= 4 * median && x >= median / 4)) kept.push_back(x);
    }
    std::sort(kept.begin(), kept.end());
    const size_t trim = kept.size() >= 5 ? 1 : 0;
    range[name] = kept.empty() ? std::make_pair(0.0, 0.0) : std::make_pair(kept[trim], kept[kept.size() - 1 - trim]);
  }
  size_t k = wanted;
  for (; k > 0; --k) {
    double least_in = std::numeric_limits<double>::max();
    for (size_t i = 0; i < k; ++i) least_in = std::min(least_in, range[costing[i].first].first);
    double most_out = 0;
    for (size_t i = k; i < out.medians.size(); ++i) most_out = std::max(most_out, range[out.medians[i].first].second);
    if (least_in > most_out) break;
  }
  out.costliest.assign(costing.begin(), costing.begin() + static_cast<std::ptrdiff_t>(k));
  if (k < wanted) {
    std::string next;
    for (size_t i = k; i < std::min(costing.size(), wanted + 1); ++i) {
      next += (next.empty() ? "" : ", ") + fmt::format("{} ({})", costing[i].first, duration_text(costing[i].second));
    }
    out.note = fmt::format("{} costliest told apart from noise over {} logged starts; the next, {}, took times that overlap from one start "
                           "to the next, so a run of tune could pick another of them: not tried",
                           k == 0 ? std::string("no transformer is among the") : fmt::format("only the {}", k), starts.size(), next);
  }
  return out;
}

std::vector<TuneCandidate> transformer_candidates(const TuneCandidate& base, const std::vector<std::pair<std::string, double>>& transformers,
                                                  int count) {
  std::vector<std::string> costliest;
  for (const auto& [name, ms] : transformers) {
    if (static_cast<int>(costliest.size()) >= count) break;
    if (ms > 0) costliest.push_back(name);
  }
  std::vector<TuneCandidate> out;
  auto add = [&](const std::vector<std::string>& names) {
    TuneCandidate c = base;
    std::string& entry = c.config.session.config_entries[kDisableOptimizersEntry];
    std::string label;
    for (const auto& n : names) {
      // ONNX Runtime 1.29 splits the list at semicolons (its header says commas: a comma-separated
      // list disables nothing, which the logged start of the configuration then shows).
      entry += (entry.empty() ? "" : ";") + n;
      label += (label.empty() ? "" : " + ") + n;
    }
    c.name = "disable " + label;
    c.config.name = c.name;
    c.disabled_transformers = names;
    out.push_back(std::move(c));
  };
  for (const auto& name : costliest) add({name});
  if (costliest.size() > 1) {
    // Named by their count, so that the table's row keeps one line: disabled_transformers lists them.
    add(costliest);
    out.back().name = fmt::format("disable the {} costliest", costliest.size());
    out.back().config.name = out.back().name;
  }
  return out;
}

namespace {

/// Logged starts of the first configuration whose graph transformer times choose the costliest.
constexpr int kLoggedStarts = 5;

/// The outputs of one inference on generated inputs (seeded), copied out of the session's memory.
std::vector<Tensor> reference_outputs(const std::string& model, const Device& device, RunConfig config, const std::string& ort_library) {
  load_runtime(ort_library);
  config.session.optimized_model_cache = false;  // compare what the options make, not a cached graph
  SessionSpec spec;
  spec.model_path = model;
  spec.device = device;
  spec.config = std::move(config);
  Session session(spec);
  std::vector<Tensor> out;
  for (const Tensor& t : session.run(random_inputs(session.inputs(), /*seed=*/7))) {
    out.push_back(Tensor::host_copy(t.name, t.type, t.shape, t.data));
  }
  return out;
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.type) {
    case ElementType::float32: return t.values<float>()[i];
    case ElementType::float64: return t.values<double>()[i];
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

struct OutputComparison {
  double largest = 0;    ///< |a - b| over every compared element
  std::string mismatch;  ///< the first difference beyond the tolerance, in words ("" when none)
};

/// Compares outputs with the reference's: float32 and float64 by value (|a - b| <= tolerance * (1 + |b|)),
/// other types by their bytes.
OutputComparison compare_outputs(const std::vector<Tensor>& outputs, const std::vector<Tensor>& reference, double tolerance) {
  OutputComparison c;
  if (outputs.size() != reference.size()) {
    c.mismatch = fmt::format("it gives {} outputs where the first configuration gives {}", outputs.size(), reference.size());
    return c;
  }
  for (size_t k = 0; k < outputs.size() && c.mismatch.empty(); ++k) {
    const Tensor& a = outputs[k];
    const Tensor& b = reference[k];
    if (a.type != b.type || a.shape != b.shape) {
      c.mismatch = "output " + b.name + " has another type or shape than the first configuration's";
    } else if (a.type != ElementType::float32 && a.type != ElementType::float64) {
      if (std::memcmp(a.data, b.data, b.bytes) != 0) c.mismatch = "output " + b.name + " differs from the first configuration's";
    } else {
      for (int64_t i = 0; i < b.element_count(); ++i) {
        const double x = value_at(a, i);
        const double y = value_at(b, i);
        if (std::isnan(x) && std::isnan(y)) continue;
        const double difference = std::fabs(x - y);
        if (!std::isnan(difference)) c.largest = std::max(c.largest, difference);
        if (!(difference <= tolerance * (1 + std::fabs(y))) && c.mismatch.empty()) {
          c.mismatch = fmt::format("output {} element {} is {:.6g} instead of {:.6g}", b.name, i, x, y);
        }
      }
    }
  }
  return c;
}

/// "235 ms", "0.31 ms", "7.4 us": a duration's size, the sentence says which way it goes.
std::string magnitude_ms(double ms) {
  const double size = std::fabs(ms);
  if (size >= 1000) return fmt::format("{:.3g} s", size / 1e3);
  return size >= 0.1 ? fmt::format("{:.3g} ms", size) : fmt::format("{:.2g} us", size * 1e3);
}

}  // namespace

std::vector<std::string> describe_disabled_transformers(const TuneReport& report) {
  std::vector<std::string> out;
  if (report.results.empty() || !report.results.front().ok()) return out;
  const TuneResult& base = report.results.front();
  size_t comparisons = 0;
  for (size_t i = 1; i < report.results.size(); ++i) comparisons += report.results[i].ok() ? 1 : 0;
  for (const auto& r : report.results) {
    const auto& names = r.candidate.disabled_transformers;
    if (names.empty()) continue;
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    if (!r.ok()) {
      out.push_back(fmt::format("disabling {} failed: {}", list, r.error));
      continue;
    }
    double logged = 0;
    for (const auto& [name, ms] : report.transformers) {
      if (std::find(names.begin(), names.end(), name) != names.end()) logged += ms;
    }
    // At start: a saving is said only where it repeats beyond noise, and never as more than the logged
    // starts show the transformers took (the rest of a larger difference in ready time is the machine's).
    const double saved = base.ready_mean_ms - r.ready_mean_ms;
    std::string at_start;
    if (paired_gain(base.ready_ms, r.ready_ms, comparisons).beyond_noise) {
      at_start = saved <= logged ? fmt::format("saves {} at start ({} in the logged starts)", magnitude_ms(saved), magnitude_ms(logged))
                                 : fmt::format("saves at most {} at start, what it took in the logged starts (the ready times differ by {}, "
                                               "the rest of it noise)",
                                               magnitude_ms(logged), magnitude_ms(saved));
    } else if (paired_gain(r.ready_ms, base.ready_ms, comparisons).beyond_noise) {
      at_start = fmt::format("adds {} at start ({} in the logged starts)", magnitude_ms(saved), magnitude_ms(logged));
    } else {
      at_start = fmt::format("changes the start within noise ({} in the logged starts)", magnitude_ms(logged));
    }
    const double cost = r.steady_p50_ms - base.steady_p50_ms;
    const std::string per_call = paired_gain(base.p50_per_round, r.p50_per_round, comparisons).beyond_noise   ? "saves " + magnitude_ms(cost) + " per call"
                                 : paired_gain(r.p50_per_round, base.p50_per_round, comparisons).beyond_noise ? "costs " + magnitude_ms(cost) + " per call"
                                                                                                             : std::string("a call within noise");
    const std::string outputs = !r.outputs_differ.empty()
                                    ? "it changes the outputs beyond the tolerance (" + r.outputs_differ + "), so it is not recommended"
                                : r.max_output_difference == 0 ? "outputs identical to the first configuration's"
                                                               : fmt::format("outputs differ from the first configuration's by at most {:.2g}", r.max_output_difference);
    out.push_back(fmt::format("disabling {} {} and {}; {}", list, at_start, per_call, outputs));
  }
  return out;
}

namespace {

/// A result's samples for one goal: its ready times (start fast) or its rounds' p50s (serve fast).
using Samples = const std::vector<double>& (*)(const TuneResult&);
const std::vector<double>& ready_samples(const TuneResult& r) { return r.ready_ms; }
const std::vector<double>& p50_samples(const TuneResult& r) { return r.p50_per_round; }

/// "412 ms ± 12.0 ms", as bench writes a mean and its σ.
std::string mean_sigma_text(const std::vector<double>& samples) {
  const MeanSigma m = mean_sigma(samples);
  return duration_text(m.mean) + (m.n >= 2 ? " ± " + duration_text(m.sigma) : std::string());
}

/// One goal's recommendation among `rs` (the first is the configuration to beat). Only a configuration
/// whose gain over the first repeats beyond noise qualifies (paired_gain: faster in every interleaved
/// round, and the paired ratio's bound below 1 at a confidence kept over all the configurations
/// compared), so that on a busy machine one lucky configuration of a dozen is not called a gain. The
/// answer is the first configuration in the sweep's order within noise of the fastest of those, and only
/// if it qualifies itself (so that noise between near-equals does not change it from one run to the
/// next: where it would, none is recommended); none qualifying, none.
/// `noun` names the figure ("ready time", "p50"), `faster` the gain ("starts faster"); `verdict` says
/// it in words, the ratio it prints the table's means' own.
int recommend(const std::vector<TuneResult>& rs, Samples samples, const char* noun, const char* faster, std::string& verdict) {
  const auto mean_of = [&](const TuneResult& r) { return mean_sigma(samples(r)).mean; };
  const auto measured = [&](const TuneResult& r) { return r.recommendable() && !samples(r).empty(); };
  int fastest = -1;
  for (int i = 0; i < static_cast<int>(rs.size()); ++i) {
    if (measured(rs[i]) && (fastest < 0 || mean_of(rs[i]) < mean_of(rs[static_cast<size_t>(fastest)]))) fastest = i;
  }
  if (fastest < 0) {
    verdict = "no configuration was measured";
    return -1;
  }
  const TuneResult& best = rs[static_cast<size_t>(fastest)];
  const TuneResult& base = rs.front();
  if (!measured(base)) {
    verdict = fmt::format("{}: {} {} (the first configuration failed, so nothing sets it against noise)", best.candidate.name, noun,
                          mean_sigma_text(samples(best)));
    return fastest;
  }
  if (fastest == 0) {
    verdict = fmt::format("none {} than the first configuration ({}), whose {} of {} is the lowest", faster, base.candidate.name, noun,
                          mean_sigma_text(samples(base)));
    return -1;
  }
  size_t comparisons = 0;
  for (size_t i = 1; i < rs.size(); ++i) comparisons += measured(rs[i]) ? 1 : 0;
  const auto gain_of = [&](const TuneResult& r) { return paired_gain(samples(base), samples(r), comparisons); };
  const TimeRatio t = compare_times(samples(base), samples(best));
  if (samples(base).size() < 3) {
    verdict = fmt::format("none recommended: {} has the lowest {}, {} the first configuration's, but {} cannot tell a gain from noise "
                          "(run 3 rounds or more)",
                          best.candidate.name, noun, t.text(), count_text(samples(base).size(), "round"));
    return -1;
  }
  int fastest_gain = -1;  // the fastest of those whose gain repeats beyond noise
  for (int i = 1; i < static_cast<int>(rs.size()); ++i) {
    if (!measured(rs[i]) || !gain_of(rs[i]).beyond_noise) continue;
    if (fastest_gain < 0 || mean_of(rs[i]) < mean_of(rs[static_cast<size_t>(fastest_gain)])) fastest_gain = i;
  }
  if (fastest_gain < 0) {
    verdict = fmt::format("none {} than the first configuration ({}, {}) beyond noise: the lowest, {} ({}), is {} its {}, {}", faster,
                          base.candidate.name, mean_sigma_text(samples(base)), best.candidate.name, mean_sigma_text(samples(best)), t.text(),
                          noun, gain_of(best).text());
    return -1;
  }
  // The answer is the first configuration in the sweep within noise of the fastest gain: only when it is
  // a gain beyond noise itself is it recommended. Else two configurations the noise cannot tell apart,
  // one of them not beyond noise, would each be named by some run: none is, and the verdict says why.
  const TuneResult& top = rs[static_cast<size_t>(fastest_gain)];
  int first = fastest_gain;
  for (int i = 1; i < fastest_gain; ++i) {
    if (measured(rs[i]) && compare_times(samples(top), samples(rs[i])).within_noise) {
      first = i;
      break;
    }
  }
  const TuneResult& chosen = rs[static_cast<size_t>(first)];
  if (!gain_of(chosen).beyond_noise) {
    verdict = fmt::format("none recommended: {} {} than the first configuration beyond noise ({} {}, {} the first's {}, {}), but {}, "
                          "earlier in the sweep, is within noise of it and not beyond noise itself ({}, {}): either may be the faster",
                          top.candidate.name, faster, noun, mean_sigma_text(samples(top)), compare_times(samples(base), samples(top)).text(),
                          mean_sigma_text(samples(base)), gain_of(top).text(), chosen.candidate.name, mean_sigma_text(samples(chosen)),
                          gain_of(chosen).text());
    return -1;
  }
  verdict = fmt::format("{}: {} {}, {} the first configuration's ({}), {}: beyond noise", chosen.candidate.name, noun,
                        mean_sigma_text(samples(chosen)), compare_times(samples(base), samples(chosen)).text(), mean_sigma_text(samples(base)),
                        gain_of(chosen).text());
  if (first != fastest_gain) verdict += fmt::format("; the lowest mean of those beyond noise, {}, is within noise of it and comes later in the sweep", top.candidate.name);
  if (fastest != fastest_gain && fastest != first) {
    verdict += fmt::format("; {} has a lower mean ({}) but its gain does not repeat beyond noise", best.candidate.name, mean_sigma_text(samples(best)));
  }
  return first;
}

}  // namespace

void choose(TuneReport& report) {
  auto& rs = report.results;
  for (auto& r : rs) {
    r.pareto = false;
    if (!r.recommendable()) continue;
    bool dominated = false;
    for (const auto& o : rs) {
      if (&o == &r || !o.recommendable()) continue;
      const bool no_worse = o.ready_mean_ms <= r.ready_mean_ms && o.steady_p50_ms <= r.steady_p50_ms;
      const bool better = o.ready_mean_ms < r.ready_mean_ms || o.steady_p50_ms < r.steady_p50_ms;
      dominated = dominated || (no_worse && better);
    }
    r.pareto = !dominated;
  }
  report.start_fast = recommend(rs, ready_samples, "ready time", "starts faster", report.start_verdict);
  report.serve_fast = recommend(rs, p50_samples, "p50", "serves faster", report.serve_verdict);
}

namespace {

/// What one timed start of a configuration measured: ready (exec until the first inference ends),
/// the first inference, and the later inferences, which give the steady latency.
struct TimedStarts {
  std::vector<double> first_ms;
  std::vector<double> steady_ms;  ///< every steady inference of every round (for p99)
  void add(TuneResult& result, const StartReport& start) {
    std::vector<double> steady;
    for (const auto& e : start.timeline.events()) {
      if (e.name != phase::warmup) continue;
      if (e.args.count("run") && e.args.at("run") == "1") {
        result.ready_ms.push_back(static_cast<double>(e.end_ns - start.spawn_ns) / 1e6);
        first_ms.push_back(e.duration_ms());
      } else {
        steady.push_back(e.duration_ms());
      }
    }
    if (!steady.empty()) result.p50_per_round.push_back(percentile(steady, 50));
    steady_ms.insert(steady_ms.end(), steady.begin(), steady.end());
    result.memory_bytes = start.devices.front().memory_bytes;
  }
  void summarize_into(TuneResult& result) const {
    const MeanSigma ready = mean_sigma(result.ready_ms);
    result.ready_mean_ms = ready.mean;
    result.ready_sigma_ms = ready.sigma;
    result.first_inference_ms = mean_sigma(first_ms).mean;
    result.steady_p50_ms = mean_sigma(result.p50_per_round).mean;
    result.steady_p99_ms = percentile(steady_ms, 99);
  }
};

}  // namespace

TuneReport run_tune(const TuneOptions& options) {
  const TuneOptions& o = options;
  validate_model_file(o.model);
  if (o.rounds < 1) throw Error("tune needs at least one timed round", "Use --repeat 1 or more (2 or more to tell a gain from noise)");
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const std::string ortfleet = detail::ortfleet_executable(o.ortfleet_executable);
  auto candidates = o.candidates.empty() ? default_sweep(o.device, o.base, o.quick) : o.candidates;
  // The private cache and the logs: a folder nobody else can plant files in, removed at the end.
  const detail::PrivateDir work_dir = detail::PrivateDir::temporary("ortfleet-tune");
  const fs::path& work = work_dir.path();
  // A private model cache: the first (untimed) start of a cached configuration fills it, as a
  // deployment's first start would; the timed starts then measure what every later start costs.
  const std::string cache = o.cache_dir.empty() ? (work / "cache").string() : o.cache_dir;
  const int64_t begin = monotonic_ns();
  const auto elapsed_s = [&] { return static_cast<double>(monotonic_ns() - begin) / 1e9; };

  std::optional<std::vector<Tensor>> reference;  // the first configuration's outputs, for those that disable transformers
  std::string transformer_note;                  // why fewer transformers were tried than asked, if so
  TuneReport report;
  report.model = o.model;
  report.device = o.device.to_string();
  auto request_for = [&](const TuneCandidate& c) {
    detail::ColdStartRequest request;
    request.model = o.model;
    request.devices = {o.device};
    request.strategy = "sequential";
    request.warmup_runs = 1 + o.steady_runs;
    request.config = c.config;
    request.ortfleet_executable = ortfleet;
    request.ort_library = o.ort_library;
    request.environment = {{detail::env_name(detail::EnvVar::cache), cache}};
    request.timeout_s = o.timeout_s;
    request.stop = o.stop;
    return request;
  };
  // One untimed start of each configuration first: it fills its model cache entry; the first's logs
  // which graph transformers cost its start (adding the configurations that disable them), and that of
  // one disabling transformers shows that ONNX Runtime no longer runs them.
  for (size_t i = 0; i < candidates.size(); ++i) {
    TuneResult result;
    result.candidate = candidates[i];
    say(fmt::format("[{}/{}] {}: untimed start", i + 1, candidates.size(), candidates[i].name));
    const bool find_transformers = i == 0 && o.transformers_to_disable > 0;
    const bool logged = find_transformers || !candidates[i].disabled_transformers.empty();
    const std::string log_path = (work / ("ort-log-" + std::to_string(i) + ".jsonl")).string();
    detail::ColdStartRequest untimed = request_for(candidates[i]);
    if (logged) untimed.arguments.insert(untimed.arguments.end(), {"--ort-log", log_path});
    const detail::ColdStart child = detail::run_cold_start(untimed);
    detail::throw_if_stopped(o.stop);
    if (!child.ok()) result.error = child.error;
    if (child.ok() && logged) {
      const auto ran = transformer_times(read_ort_log(log_path), std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      std::string still_ran;
      for (const auto& name : candidates[i].disabled_transformers) {
        if (std::any_of(ran.begin(), ran.end(), [&](const auto& t) { return t.first == name; })) still_ran += (still_ran.empty() ? "" : ", ") + name;
      }
      if (!still_ran.empty()) result.error = "ONNX Runtime still ran " + still_ran + " with " + kDisableOptimizersEntry + " naming it";
      if (find_transformers) {
        // One logged start's times pick a different "costliest" set from run to run: a few more starts,
        // and only the transformers that cost more than the rest in every one of them.
        std::vector<std::vector<std::pair<std::string, double>>> starts = {ran};
        for (int again = 1; again < kLoggedStarts; ++again) {
          say(fmt::format("[{}/{}] {}: logged start {} of {}, for its graph transformers", i + 1, candidates.size(), candidates[i].name, again + 1,
                          kLoggedStarts));
          const detail::ColdStart more = detail::run_cold_start(untimed);
          detail::throw_if_stopped(o.stop);
          if (!more.ok()) break;
          starts.push_back(transformer_times(read_ort_log(log_path), std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
        }
        const TransformerCosts costs = transformer_costs(starts, o.transformers_to_disable);
        report.transformers = costs.medians;
        transformer_note = costs.note;
        auto more = transformer_candidates(candidates[0], costs.costliest, o.transformers_to_disable);
        candidates.insert(candidates.end(), more.begin(), more.end());
      }
    }
    if (!candidates[i].disabled_transformers.empty() && result.error.empty()) {
      // A fusion replaces nodes by one kernel: without it the numbers may differ, within rounding.
      say(fmt::format("[{}/{}] {}: comparing outputs", i + 1, candidates.size(), candidates[i].name));
      try {
        if (!reference) reference = reference_outputs(o.model, o.device, candidates[0].config, o.ort_library);
        const OutputComparison c =
            compare_outputs(reference_outputs(o.model, o.device, candidates[i].config, o.ort_library), *reference, o.output_tolerance);
        result.max_output_difference = c.largest;
        result.outputs_differ = c.mismatch;
      } catch (const std::exception& e) {
        result.error = Error::from(e).what_failed();
      }
    }
    report.results.push_back(std::move(result));
  }

  // The timed rounds: every configuration once a round, round-robin, so that slow drifts of the
  // machine touch all alike; cut to the budget once the first shows what a round costs.
  if (o.notice) {
    o.notice(fmt::format("{} configurations, {} of a cold start each, in fresh processes{}", candidates.size(),
                         count_text(static_cast<uint64_t>(o.rounds), "timed round"),
                         o.budget_s > 0 ? fmt::format(", within a budget of {} (--budget)", duration_text(o.budget_s * 1000)) : ""));
  }
  std::vector<TimedStarts> timed(report.results.size());
  int rounds = o.rounds;
  int run = 0;
  for (; run < rounds; ++run) {
    if (run > 0 && o.budget_s > 0 && elapsed_s() >= o.budget_s) break;  // none starts past the budget
    const double round_begin = elapsed_s();
    // Each round begins one configuration further on: none is always first or last of a round (the
    // configurations that disable transformers come last in the sweep), where a machine that warms
    // up or tires within a round would favour it.
    for (size_t k = 0; k < report.results.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(run)) % report.results.size();
      TuneResult& result = report.results[i];
      if (!result.error.empty()) continue;
      say(fmt::format("round {}/{}: [{}/{}] {}", run + 1, rounds, i + 1, report.results.size(), result.candidate.name));
      const detail::ColdStart child = detail::run_cold_start(request_for(result.candidate));
      detail::throw_if_stopped(o.stop);
      if (!child.ok()) {
        result.error = child.error;
        continue;
      }
      timed[i].add(result, *child.report);
    }
    if (run == 0) {
      rounds = detail::rounds_that_fit(o.rounds, o.budget_s, elapsed_s(), elapsed_s() - round_begin, 2);
      if (rounds < o.rounds && o.notice) {
        o.notice(fmt::format("one round took {}: running {} of the {} rounds asked, to end within the budget of {} (--budget; 0 runs them all)",
                             duration_text((elapsed_s() - round_begin) * 1000), rounds, o.rounds, duration_text(o.budget_s * 1000)));
      }
    }
  }
  report.rounds = run;
  for (size_t i = 0; i < report.results.size(); ++i) timed[i].summarize_into(report.results[i]);
  choose(report);
  report.transformer_findings = describe_disabled_transformers(report);
  if (!transformer_note.empty()) report.transformer_findings.insert(report.transformer_findings.begin(), transformer_note);
  // The recommendation accounts for the calls a server makes after start-up: with a dynamic batch,
  // what each batch switch costs one ONNX Runtime session under the configuration that serves fastest.
  // (With no recommendation, the first configuration's.)
  const int chosen = report.serve_fast >= 0 ? report.serve_fast : report.start_fast >= 0 ? report.start_fast : 0;
  if (report.results[static_cast<size_t>(chosen)].ok()) {
    const std::vector<std::string> dynamic_dims = inspect_model(o.model).dynamic_dims;
    if (o.shape_switch_seconds > 0 && !dynamic_dims.empty()) say("measuring a batch switch");
    report.shape_switch = measure_shape_switch(o.model, dynamic_dims, o.device,
                                               report.results[static_cast<size_t>(chosen)].candidate.config, o.shape_switch_seconds,
                                               o.ort_library);
    const ShapeSwitchCost& c = report.shape_switch;
    if (c.measured()) {
      // Measured on this model: a switch that costs little is said so, whatever the device.
      report.shapes_advice = fmt::format("a batch switch costs {:.3g} ms a call on one ONNX Runtime session ({:.3g} ms without switches): {}",
                                         c.cost_ms, c.steady_call_ms,
                                         c.cost_ms > 0.1 * c.steady_call_ms ? detail::shape_advice(o.device)
                                                                            : std::string("one session serves every batch of this model"));
    }
  }
  return report;
}

std::string TuneReport::to_json() const {
  json rows = json::array();
  for (const auto& r : results) {
    rows.push_back({{"name", r.candidate.name}, {"config", json::parse(r.candidate.config.to_json())},
                    {"ready_ms", r.ready_ms}, {"ready_mean_ms", r.ready_mean_ms}, {"ready_sigma_ms", r.ready_sigma_ms},
                    {"first_inference_ms", r.first_inference_ms}, {"p50_per_round_ms", r.p50_per_round}, {"steady_p50_ms", r.steady_p50_ms},
                    {"steady_p99_ms", r.steady_p99_ms}, {"memory_bytes", r.memory_bytes}, {"pareto", r.pareto},
                    {"disabled_transformers", r.candidate.disabled_transformers},
                    {"max_output_difference", r.max_output_difference}, {"outputs_differ", r.outputs_differ}, {"error", r.error}});
  }
  json transformers_json = json::array();
  for (const auto& [n, ms] : transformers) transformers_json.push_back({{"name", n}, {"ms", ms}});
  auto name_of = [&](int i) { return i >= 0 ? json(results[static_cast<size_t>(i)].candidate.name) : json(nullptr); };
  return json{{"ortfleet_tune", 1}, {"model", model}, {"device", device}, {"statistic", "mean"}, {"rounds", rounds}, {"results", rows},
              {"start_fast", name_of(start_fast)}, {"serve_fast", name_of(serve_fast)},
              {"start_verdict", start_verdict}, {"serve_verdict", serve_verdict},
              {"shape_switch", {{"call_ms", shape_switch.call_ms}, {"steady_call_ms", shape_switch.steady_call_ms}, {"cost_ms", shape_switch.cost_ms}}},
              {"shapes_advice", shapes_advice}, {"transformers", transformers_json}, {"transformer_findings", transformer_findings}}
      .dump(2);
}

}  // namespace ortfleet
