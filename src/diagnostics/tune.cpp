#include "ortfleet/diagnostics/tune.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "diagnostics/cold_start.hpp"
#include "process/child_process.hpp"
#include "ortfleet/diagnostics/statistics.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/base/error.hpp"
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
    out.push_back({name, c});
  };
  add("as given", [](RunConfig&) {});
  if (device.is_gpu()) {
    add("conv=HEURISTIC", [](RunConfig& c) { c.cuda.conv_algo_search = ConvAlgoSearch::heuristic; });
    add("conv=DEFAULT", [](RunConfig& c) { c.cuda.conv_algo_search = ConvAlgoSearch::default_algo; });
  }
  add("model cache", [](RunConfig& c) { c.session.optimized_model_cache = true; });
  if (device.is_gpu()) {
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
  if (!device.is_gpu() && cores > 2) {
    add(fmt::format("intra-op {} threads", cores / 2), [cores](RunConfig& c) { c.session.intra_op_threads = cores / 2; });
  }
  if (device.is_gpu()) {
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

void choose(TuneReport& report) {
  auto& rs = report.results;
  for (auto& r : rs) {
    r.pareto = false;
    if (!r.ok()) continue;
    bool dominated = false;
    for (const auto& o : rs) {
      if (&o == &r || !o.ok()) continue;
      const bool no_worse = o.ready_median_ms <= r.ready_median_ms && o.steady_p50_ms <= r.steady_p50_ms;
      const bool better = o.ready_median_ms < r.ready_median_ms || o.steady_p50_ms < r.steady_p50_ms;
      dominated = dominated || (no_worse && better);
    }
    r.pareto = !dominated;
  }
  report.start_fast = report.serve_fast = -1;
  for (int i = 0; i < static_cast<int>(rs.size()); ++i) {
    if (!rs[i].pareto) continue;
    auto& sf = report.start_fast;
    auto& sv = report.serve_fast;
    if (sf < 0 || rs[i].ready_median_ms < rs[sf].ready_median_ms) sf = i;
    if (sv < 0 || rs[i].steady_p50_ms < rs[sv].steady_p50_ms) sv = i;
  }
}

TuneReport run_tune(const TuneOptions& options) {
  const TuneOptions& o = options;
  validate_model_file(o.model);
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const std::string ortfleet = detail::ortfleet_executable(o.ortfleet_executable);
  const auto candidates = o.candidates.empty() ? default_sweep(o.device, o.base, o.quick) : o.candidates;
  // Candidate configs and the private cache: a folder nobody else can plant files in, removed at the end.
  const detail::PrivateDir work_dir = detail::PrivateDir::temporary("ortfleet-tune");
  const fs::path& work = work_dir.path();
  // A private model cache: the first (untimed) start of a cached configuration fills it, as a
  // deployment's first start would; the timed starts then measure what every later start costs.
  const std::string cache = o.cache_dir.empty() ? (work / "cache").string() : o.cache_dir;

  TuneReport report;
  report.model = o.model;
  report.device = o.device.to_string();
  for (size_t i = 0; i < candidates.size(); ++i) {
    TuneResult result;
    result.candidate = candidates[i];
    const std::string config_path = (work / ("config-" + std::to_string(i) + ".json")).string();
    candidates[i].config.save(config_path);
    detail::ColdStartRequest request;
    request.model = o.model;
    request.devices = {o.device};
    request.strategy = "sequential";
    request.warmup_runs = 1 + o.steady_runs;
    request.arguments = {"--config", config_path};
    request.ortfleet_executable = ortfleet;
    request.ort_library = o.ort_library;
    request.environment = {{"ORTFLEET_CACHE", cache}};
    request.timeout_s = o.timeout_s;
    std::vector<double> first;
    std::vector<double> steady;
    for (int rep = 0; rep < 1 + o.repetitions && result.error.empty(); ++rep) {
      say(fmt::format("[{}/{}] {}: {}", i + 1, candidates.size(), candidates[i].name,
                      rep == 0 ? "untimed start" : fmt::format("start {}/{}", rep, o.repetitions)));
      const detail::ColdStart child = detail::run_cold_start(request);
      if (!child.ok()) {
        result.error = child.error;
        break;
      }
      const StartReport& start = *child.report;
      if (rep == 0) continue;
      // Ready = exec until the first inference ends; the later inferences give the steady latency.
      for (const auto& e : start.timeline.events()) {
        if (e.name != phase::warmup) continue;
        if (e.args.count("run") && e.args.at("run") == "1") {
          result.ready_ms.push_back(static_cast<double>(e.end_ns - start.spawn_ns) / 1e6);
          first.push_back(e.duration_ms());
        } else {
          steady.push_back(e.duration_ms());
        }
      }
      result.memory_bytes = start.devices.front().memory_bytes;
    }
    result.ready_median_ms = summarize(result.ready_ms).median;
    result.first_inference_ms = summarize(first).median;
    result.steady_p50_ms = percentile(steady, 50);
    result.steady_p99_ms = percentile(steady, 99);
    report.results.push_back(std::move(result));
  }
  choose(report);
  // The recommendation accounts for the calls a server makes after start-up: with a dynamic batch,
  // what each batch switch costs one ONNX Runtime session under the configuration that serves fastest.
  const int chosen = report.serve_fast >= 0 ? report.serve_fast : report.start_fast;
  if (chosen >= 0) {
    say("measuring a batch switch");
    report.shape_switch = measure_shape_switch(o.model, inspect_model(o.model).dynamic_dims, o.device,
                                               report.results[static_cast<size_t>(chosen)].candidate.config, o.shape_switch_seconds,
                                               o.ort_library);
    const ShapeSwitchCost& c = report.shape_switch;
    if (c.measured() && c.cost_ms > 0.1 * c.steady_call_ms) {
      report.shapes_advice = fmt::format(
          "a batch switch costs {:.3g} ms a call on one ONNX Runtime session ({:.3g} ms without switches): declare the batches you "
          "serve (--batches 1,2,4,8, or shapes.batches in the config) so that each has a session of its own", c.cost_ms, c.steady_call_ms);
    } else if (c.measured()) {
      report.shapes_advice = fmt::format("a batch switch costs {:.3g} ms a call ({:.3g} ms without switches): one session serves every batch",
                                         c.cost_ms, c.steady_call_ms);
    }
  }
  return report;
}

std::string TuneReport::to_json() const {
  json rows = json::array();
  for (const auto& r : results) {
    rows.push_back({{"name", r.candidate.name}, {"config", json::parse(r.candidate.config.to_json())},
                    {"ready_ms", r.ready_ms}, {"ready_median_ms", r.ready_median_ms},
                    {"first_inference_ms", r.first_inference_ms}, {"steady_p50_ms", r.steady_p50_ms},
                    {"steady_p99_ms", r.steady_p99_ms}, {"memory_bytes", r.memory_bytes}, {"pareto", r.pareto},
                    {"error", r.error}});
  }
  auto name_of = [&](int i) { return i >= 0 ? json(results[static_cast<size_t>(i)].candidate.name) : json(nullptr); };
  return json{{"ortfleet_tune", 1}, {"model", model}, {"device", device}, {"results", rows},
              {"start_fast", name_of(start_fast)}, {"serve_fast", name_of(serve_fast)},
              {"shape_switch", {{"call_ms", shape_switch.call_ms}, {"steady_call_ms", shape_switch.steady_call_ms}, {"cost_ms", shape_switch.cost_ms}}},
              {"shapes_advice", shapes_advice}}
      .dump(2);
}

}  // namespace ortfleet
