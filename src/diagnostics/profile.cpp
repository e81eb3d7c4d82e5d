#include "ortfleet/diagnostics/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstring>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include <chrono>

#include "base/private_dir.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "diagnostics/cold_start.hpp"
#include "process/child_process.hpp"
#include "diagnostics/statistics.hpp"
#include "ortfleet/diagnostics/throughput.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

// --- parsers ----------------------------------------------------------------------------------------

std::vector<OrtProfileEvent> parse_ort_profile(const std::string& text, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Error("malformed ONNX Runtime profile " + source + ": " + why,
                 "It should be the JSON file ONNX Runtime writes when profiling is enabled");
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers no double holds (1e999)
    throw bad(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_array()) throw bad("expected an array of trace events");
  std::vector<OrtProfileEvent> events;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    if (!e.is_object()) throw bad("event " + std::to_string(i) + " is not an object");
    for (const char* key : {"cat", "name", "ts", "dur"}) {
      if (!e.contains(key)) throw bad("event " + std::to_string(i) + " has no \"" + key + "\"");
    }
    if (!e["ts"].is_number() || !e["dur"].is_number() || !e["cat"].is_string() || !e["name"].is_string()) {
      throw bad("event " + std::to_string(i) + " has a field of the wrong type");
    }
    OrtProfileEvent ev;
    ev.category = e["cat"].get<std::string>();
    ev.name = e["name"].get<std::string>();
    ev.ts_us = e["ts"].get<int64_t>();
    ev.dur_us = e["dur"].get<int64_t>();
    if (ev.dur_us < 0) throw bad("event " + std::to_string(i) + " has a negative duration");
    if (e.contains("args") && e["args"].is_object()) {
      ev.op = e["args"].value("op_name", "");
      ev.provider = e["args"].value("provider", "");
    }
    events.push_back(std::move(ev));
  }
  return events;
}

std::vector<OrtLogLine> parse_ort_log(const std::string& text, const std::string& source) {
  std::vector<OrtLogLine> lines;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      const json j = json::parse(line);
      lines.push_back({j.at("t").get<int64_t>(), j.at("severity").get<int>(), j.at("message").get<std::string>()});
    } catch (const json::exception& e) {
      throw Error("malformed ONNX Runtime log " + source + " line " + std::to_string(number) + ": " + e.what(),
                  "It should come from 'ortfleet start --ort-log'");
    }
  }
  return lines;
}

std::vector<OrtLogLine> read_ort_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read ONNX Runtime's log " + path, "The start that wrote it may have failed before logging");
  std::stringstream text;
  text << in.rdbuf();
  return parse_ort_log(text.str(), path);
}

// --- the report -------------------------------------------------------------------------------------

namespace {

struct Advice {
  const char* name;
  const char* label;
  const char* advice;
};

constexpr Advice kAdvice[] = {
    {"process.start", "process start (exec to main)", "dynamic loading of the executable; rarely worth attention"},
    {"tool.setup", "ortfleet set-up (arguments, device list)", "fixed cost of the command line"},
    {"runtime.load", "ONNX Runtime library load", "a fleet loads it beside CUDA initialisation, once per process"},
    {"ep.register", "CUDA EP library load, registration and cuInit",
     "the 230 MB CUDA EP library and cuInit: a fleet loads the library, runs cuInit and reads the model in parallel"},
    {"cuda.context", "CUDA context creation",
     "about 0.1 s per GPU and serialised by the driver across GPUs: keep one long-lived process per GPU "
     "(ortfleet's worker processes) and GPU persistence mode on"},
    {"model.load", "model read and parse",
     "protobuf parsing copies every weight: keep large weights as external data, or use the optimised-model cache "
     "(--model-cache), which stores them that way"},
    {"session.setup", "execution provider and allocator set-up", "creating the EP instance, its streams and handles"},
    {"graph.optimization", "graph optimisation",
     "pay it once: the optimised-model cache (--model-cache) loads a pre-optimised copy; or lower --graph-opt "
     "('ortfleet tune' measures the speed it costs)"},
    {"partitioning", "partitioning, placement and session state",
     "grows with the node count; the optimised-model cache removes the work of fusing nodes first"},
    {"initializer.upload", "initializer upload", "copying weights into device memory; external data (mmap) avoids a host copy"},
    {"weights.upload", "weights upload (ortfleet, staged)",
     "the cached graph's weights in a few large copies from pinned memory, before the session exists"},
    {"kernel.creation", "kernel creation and memory planning", "one-time per session; shrinks with fewer nodes"},
    {"session.other", "rest of session creation", "session creation outside the steps ONNX Runtime logs"},
    {"warmup", "first inference (warm-up)",
     "every new ONNX Runtime session pays it, in any process: cuDNN's plans for each convolution shape (built, kernels "
     "loaded or compiled) and, with EXHAUSTIVE, its algorithm search live in the session; HEURISTIC or DEFAULT (--conv-algo) "
     "cut the search, not the plans ('ortfleet tune' shows what each costs in latency); a session a warm pool keeps "
     "resident (the one a start leaves behind, or ortfleet serve) skips all of it"},
};

const Advice& advice_for(const std::string& name) {
  for (const auto& a : kAdvice) {
    if (name == a.name) return a;
  }
  static const Advice unknown{"", "", ""};
  return unknown;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_transformer_message(const std::string& m) {
  return starts_with(m, "Applying graph transformer") || starts_with(m, "GraphTransformer ") ||
         starts_with(m, "Graph transformer step") || starts_with(m, "Skipping graph transformer") ||
         starts_with(m, "Stopping graph transformer") || starts_with(m, "Running graph optimizations") ||
         starts_with(m, "No graph transformers") ||
         (starts_with(m, "Applying ") && m.find(" graph transformer(s) for level") != std::string::npos);
}

/// The transformer a message names: "Applying graph transformer X on step 1." and
/// "GraphTransformer X modified: 0 with status: OK" both give X (empty for other messages).
std::string transformer_named(const std::string& m, const char* prefix, const char* suffix) {
  if (!starts_with(m, prefix)) return {};
  const size_t begin = std::strlen(prefix);
  const size_t end = m.find(suffix, begin);
  return end == std::string::npos ? std::string{} : m.substr(begin, end - begin);
}

}  // namespace

std::vector<std::pair<std::string, double>> transformer_times(const std::vector<OrtLogLine>& log, int64_t from_ns, int64_t to_ns) {
  std::map<std::string, double> per_transformer;
  std::map<std::string, int64_t> open_transformer;
  for (const auto& l : log) {
    if (l.t_ns < from_ns || l.t_ns > to_ns) continue;
    if (auto name = transformer_named(l.message, "Applying graph transformer ", " on step"); !name.empty()) {
      open_transformer[name] = l.t_ns;
    } else if (auto done = transformer_named(l.message, "GraphTransformer ", " modified"); !done.empty() && open_transformer.count(done)) {
      per_transformer[done] += static_cast<double>(l.t_ns - open_transformer[done]) / 1e6;
      open_transformer.erase(done);
    }
  }
  std::vector<std::pair<std::string, double>> out(per_transformer.begin(), per_transformer.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

namespace {

/// "1.27 GB at 12.3 GB/s", "50.6 kB": what an upload moved, and its speed where it is one worth saying.
std::string upload_text(double bytes, double gb_per_s) {
  const std::string moved = bytes_text(static_cast<uint64_t>(bytes));
  return gb_per_s >= 0.1 ? fmt::format("{} at {:.1f} GB/s", moved, gb_per_s) : moved;
}

/// Adds phase `name` (from..to, our clock) to `r` with its label and advice; nothing when empty.
void add_phase(ProfileReport& r, const std::string& name, int64_t from, int64_t to, std::string detail = {}) {
  if (to <= from) return;
  const Advice& a = advice_for(name);
  r.phases.push_back({name, a.label[0] ? a.label : name, static_cast<double>(to - from) / 1e6, 0, std::move(detail), a.advice});
}

/// The phases before the session's creation: ortfleet's own (the runtime, the EP, CUDA, the model's
/// read, the weights' upload) and the tool's setup from main() to the first of them.
void add_phases_before_session(ProfileReport& r, const std::vector<TimelineEvent>& events, const TimelineEvent& create, int64_t main_ns) {
  // Before the session: our own phases.
  int64_t first_ortfleet_ns = create.start_ns;
  for (const auto& e : events) {
    if (e.name != phase::process_start) first_ortfleet_ns = std::min(first_ortfleet_ns, e.start_ns);
  }
  for (const auto& e : events) {
    if (e.end_ns > create.start_ns) continue;
    if (e.name == phase::process_start) add_phase(r, "process.start", e.start_ns, e.end_ns);
    if (e.name == phase::runtime_load || e.name == phase::ep_register || e.name == phase::cuda_context ||
        e.name == phase::cuda_init || e.name == phase::ep_library_load || e.name == phase::model_read) {
      add_phase(r, e.name, e.start_ns, e.end_ns);
    }
    if (e.name == phase::weights_upload) {
      // The cached graph's weights, uploaded by ortfleet in large copies before the session exists.
      // Its speed is that of the copies; finding the weights in the entry's files is named beside it.
      const double bytes = e.args.count("bytes") ? std::stod(e.args.at("bytes")) : 0;
      const double read_ms = e.args.count("read_ms") ? std::stod(e.args.at("read_ms")) : 0;
      const double seconds = e.args.count("copy_ms") ? std::stod(e.args.at("copy_ms")) / 1e3 : static_cast<double>(e.end_ns - e.start_ns) / 1e9;
      r.upload_gb_per_s = seconds > 0 ? bytes / 1e9 / seconds : 0;
      std::string detail = upload_text(bytes, r.upload_gb_per_s);
      if (e.args.count("initializers")) detail += fmt::format(", {} weights found in {:.0f} ms", e.args.at("initializers"), read_ms);
      add_phase(r, e.name, e.start_ns, e.end_ns, detail);
    }
  }
  add_phase(r, "tool.setup", main_ns, first_ortfleet_ns);

}

/// The phases inside the session's creation, from ONNX Runtime's own log markers; `uploaded` when
/// ortfleet uploaded the weights before the session existed.
void add_session_phases(ProfileReport& r, const std::vector<OrtLogLine>& log, const TimelineEvent& create, const ModelFacts& facts, bool uploaded) {
  // Inside session creation: ONNX Runtime's own log markers.
  auto at = [&](const char* prefix, bool last = false) -> int64_t {
    int64_t found = 0;
    for (const auto& l : log) {
      if (l.t_ns < create.start_ns || l.t_ns > create.end_ns || !starts_with(l.message, prefix)) continue;
      found = l.t_ns;
      if (!last) break;
    }
    return found;
  };
  const int64_t t_init = at("Initializing session.");
  const int64_t t_save = at("Saving initialized tensors.");
  const int64_t t_saved = at("Done saving initialized tensors");
  const int64_t t_done = at("Session successfully initialized.");
  int64_t graph_begin = 0;
  for (const auto& l : log) {
    if (l.t_ns < create.start_ns || l.t_ns > create.end_ns || !is_transformer_message(l.message)) continue;
    graph_begin = l.t_ns;
    break;
  }
  r.transformers = transformer_times(log, create.start_ns, create.end_ns);

  // A graph loaded with nothing left to optimise (an ORT-format cache entry) logs no transformer:
  // its partitioning starts when the session's initialisation does.
  if (graph_begin == 0) graph_begin = t_init;
  if (t_init != 0 && graph_begin != 0 && t_save != 0 && t_saved != 0 && t_done != 0) {
    double transformers_ms = 0;
    for (const auto& [n, ms] : r.transformers) transformers_ms += ms;
    add_phase(r, "model.load", create.start_ns, t_init);
    add_phase(r, "session.setup", t_init, graph_begin);
    // Graph optimisation is the time inside transformers; the gaps between them (partitioning,
    // layout and memcpy insertion) count with what follows up to the session state.
    const auto optimisation_ns = static_cast<int64_t>(transformers_ms * 1e6);
    add_phase(r, "graph.optimization", graph_begin, graph_begin + optimisation_ns,
        r.transformers.empty() ? "" : fmt::format("largest: {} {:.0f} ms", r.transformers.front().first, r.transformers.front().second));
    add_phase(r, "partitioning", graph_begin + optimisation_ns, t_save);
    const double upload_s = static_cast<double>(t_saved - t_save) / 1e9;
    const double ort_upload_gb_per_s = upload_s > 0 ? static_cast<double>(facts.initializer_bytes) / 1e9 / upload_s : 0;
    if (uploaded) {
      // ortfleet uploaded the weights before: ONNX Runtime only placed the rest (shapes, scalars).
      add_phase(r, "initializer.upload", t_save, t_saved, "the initializers ortfleet did not upload (shapes, scalars)");
    } else {
      r.upload_gb_per_s = ort_upload_gb_per_s;
      add_phase(r, "initializer.upload", t_save, t_saved, upload_text(static_cast<double>(facts.initializer_bytes), ort_upload_gb_per_s));
    }
    add_phase(r, "kernel.creation", t_saved, t_done);
    add_phase(r, "session.other", t_done, create.end_ns);
  } else {
    add_phase(r, "session.create", create.start_ns, create.end_ns, "ONNX Runtime's log lacked the markers to split it");
  }

}

/// Each node's first and steady times from ONNX Runtime's profile (runs told apart by its model_run
/// events), the conv nodes' totals, where nodes were placed and which ops fell back to the CPU.
void add_node_costs(ProfileReport& r, const std::vector<OrtProfileEvent>& ort_profile, bool gpu) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const auto& e : ort_profile) {
    if (e.category == "Session" && e.name == "model_run") runs.emplace_back(e.ts_us, e.ts_us + e.dur_us);
  }
  std::sort(runs.begin(), runs.end());
  std::map<std::string, NodeCost> nodes;
  std::map<std::string, std::vector<double>> later;
  std::set<std::string> fallback;
  for (const auto& e : ort_profile) {
    if (e.category != "Node") continue;
    size_t run = runs.size();
    for (size_t i = 0; i < runs.size(); ++i) {
      if (e.ts_us >= runs[i].first && e.ts_us <= runs[i].second) run = i;
    }
    if (run == runs.size()) continue;
    std::string name = e.name;
    if (const auto k = name.rfind("_kernel_time"); k != std::string::npos) name.erase(k);
    auto& n = nodes[name];
    n.node = name;
    n.op = e.op;
    n.provider = e.provider;
    if (run == 0) {
      n.first_ms += static_cast<double>(e.dur_us) / 1e3;
      ++r.placement[e.provider];
      if (e.op == "MemcpyFromHost" || e.op == "MemcpyToHost") ++r.memcpy_nodes;
      else if (gpu && e.provider == "CPUExecutionProvider") fallback.insert(e.op);
    } else {
      later[name].push_back(static_cast<double>(e.dur_us) / 1e3);
    }
  }
  for (auto& [name, n] : nodes) {
    n.steady_ms = summarize(later[name]).median;
    if (n.op == "Conv" || n.op == "FusedConv") {
      ++r.conv_nodes;
      r.conv_first_ms += n.first_ms;
      r.conv_steady_ms += n.steady_ms;
    }
    r.nodes.push_back(n);
  }
  std::sort(r.nodes.begin(), r.nodes.end(),
            [](const NodeCost& a, const NodeCost& b) { return a.first_ms - a.steady_ms > b.first_ms - b.steady_ms; });
  if (r.nodes.size() > 15) r.nodes.resize(15);
  r.cpu_fallback.assign(fallback.begin(), fallback.end());

}

/// Each phase's share of the wall time, and the three largest costs with their advice.
void rank_costs(ProfileReport& r) {
  for (auto& p : r.phases) {
    p.share = r.wall_ms > 0 ? p.ms / r.wall_ms : 0;
    r.attributed_ms += p.ms;
  }
  std::vector<const ProfilePhase*> order;
  for (const auto& p : r.phases) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
  for (size_t i = 0; i < order.size() && i < 3; ++i) {
    r.top_costs.push_back(fmt::format("{}: {:.0f} ms ({:.0f}%) - {}", order[i]->label, order[i]->ms, order[i]->share * 100, order[i]->advice));
  }

}

/// ONNX Runtime's profile events on the start's timeline: its session_initialization ends when our
/// session.create does.
void add_ort_events(ProfileReport& r, const std::vector<OrtProfileEvent>& ort_profile, const TimelineEvent& create, int pid) {
  const OrtProfileEvent* session_init = nullptr;
  for (const auto& e : ort_profile) {
    if (e.category == "Session" && e.name == "session_initialization") session_init = &e;
  }
  if (session_init != nullptr) {
    const int64_t offset = create.end_ns - (session_init->ts_us + session_init->dur_us) * 1000;
    std::vector<TimelineEvent> ort_events;
    for (const auto& e : ort_profile) {
      TimelineEvent t;
      t.name = e.category == "Node" ? e.op + " " + e.name : e.name;
      t.lane = r.device + " onnxruntime";
      t.start_ns = offset + e.ts_us * 1000;
      t.end_ns = t.start_ns + e.dur_us * 1000;
      t.pid = pid;
      if (!e.provider.empty()) t.args["provider"] = e.provider;
      ort_events.push_back(std::move(t));
    }
    r.timeline.add_all(ort_events);
  }
}

}  // namespace

ProfileReport build_profile(const StartReport& start, const std::vector<OrtLogLine>& log,
                            const std::vector<OrtProfileEvent>& ort_profile, const ModelFacts& facts) {
  ProfileReport r;
  r.model = start.model;
  if (start.devices.empty()) throw Error("the profiled start has no device");
  r.device = start.devices.front().device.to_string();
  r.on_gpu = start.devices.front().device.is_gpu();
  r.initializer_bytes = facts.initializer_bytes;
  r.dynamic_dims = facts.dynamic_dims;
  if (!r.dynamic_dims.empty() && !r.on_gpu) {
    r.shapes_advice = "on the CPU a call of a new shape costs little more than a steady one (no cuDNN plans to build): one session serves "
                      "every shape; measure a stream with 'ortfleet bench --inference --shape-mix'";
  } else if (!r.dynamic_dims.empty()) {
    r.shapes_advice =
        "with a single ONNX Runtime session every call whose shape differs from the previous one rebuilds each convolution's cuDNN "
        "plan (ONNX Runtime 1.29's CUDA EP; ResNet-50 on an H100: 106 ms a call instead of 1.5 ms): declare the shapes you serve "
        "(--batches 1,2,4,8 or --shapes) so that each gets a session of its own at start-up, and measure the stream with "
        "'ortfleet bench --inference --shape-mix'";
  }
  r.timeline = start.timeline;
  const auto events = start.timeline.events();

  auto find = [&](const char* name, int run = 0) -> const TimelineEvent* {
    for (const auto& e : events) {
      if (e.name != name) continue;
      if (run > 0 && e.args.count("run") && e.args.at("run") != std::to_string(run)) continue;
      return &e;
    }
    return nullptr;
  };
  const TimelineEvent* create = find(phase::session_create);
  const TimelineEvent* first_run = find(phase::warmup, 1);
  if (create == nullptr || first_run == nullptr) {
    throw Error("the profiled start has no session creation or first inference (did it fail?)");
  }
  r.wall_ms = static_cast<double>(first_run->end_ns - start.spawn_ns) / 1e6;

  const TimelineEvent* proc = find(phase::process_start);
  add_phases_before_session(r, events, *create, proc ? proc->end_ns : start.main_ns);
  add_session_phases(r, log, *create, facts, find(phase::weights_upload) != nullptr);
  add_node_costs(r, ort_profile, start.devices.front().device.is_gpu());

  std::string warm_detail;
  if (r.conv_nodes > 0) {
    warm_detail = fmt::format("{} conv nodes: {:.0f} ms in this run vs {:.1f} ms later{}", r.conv_nodes, r.conv_first_ms, r.conv_steady_ms,
                              r.on_gpu ? " (cuDNN's plans and search, per session)" : "");
  }
  add_phase(r, "warmup", first_run->start_ns, first_run->end_ns, warm_detail);
  if (!r.on_gpu && !r.phases.empty() && r.phases.back().name == "warmup") {
    // The advice of the first inference is the GPU's (cuDNN's plans and search): on the CPU it is the
    // kernels' first run and the memory they plan.
    r.phases.back().advice = "every new ONNX Runtime session pays it: its kernels' first run and the memory they plan; a session a warm "
                             "pool keeps resident (the one a start leaves behind, or ortfleet serve) skips it";
  }

  std::vector<double> steady;
  for (const auto& e : events) {
    if (e.name == phase::warmup && e.args.count("run") && e.args.at("run") != "1") steady.push_back(e.duration_ms());
  }
  r.steady_p50_ms = percentile(steady, 50);
  r.steady_p99_ms = percentile(steady, 99);

  rank_costs(r);

  add_ort_events(r, ort_profile, *create, start.devices.front().pid);
  return r;
}

// --- the floor --------------------------------------------------------------------------------------

void add_floor(ProfileReport& r, const MachineSpeeds& speeds) {
  r.speeds = speeds;
  r.floor.clear();
  auto phase_ms = [&](const char* name) {
    double ms = 0;
    for (const auto& p : r.phases) ms += p.name == name ? p.ms : 0;
    return ms;
  };
  const auto events = r.timeline.events();
  auto event_ms = [&](const char* name) {
    for (const auto& e : events) {
      if (e.name == name) return e.duration_ms();
    }
    return 0.0;
  };
  const TimelineEvent* create = nullptr;
  for (const auto& e : events) create = create == nullptr && e.name == phase::session_create ? &e : create;

  // Process: exec to main is the price of any process; ortfleet's own set-up is not.
  FloorTerm process{"process", "process start", phase_ms("process.start"), phase_ms("process.start") + phase_ms("tool.setup"),
                    "exec to main, as measured"};

  // Runtime: loading ONNX Runtime and registering the EP can overlap cuInit and the context, so the
  // floor is the longer of the two; measured is the span they took.
  FloorTerm runtime{"runtime", r.on_gpu ? "runtime, EP and CUDA context" : "runtime load", 0, 0, ""};
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  for (const auto& e : events) {
    if (create != nullptr && e.end_ns > create->start_ns) continue;
    if (e.name != phase::runtime_load && e.name != phase::ep_library_load && e.name != phase::ep_register &&
        e.name != phase::cuda_init && e.name != phase::cuda_context) continue;
    first_ns = first_ns == 0 ? e.start_ns : std::min(first_ns, e.start_ns);
    last_ns = std::max(last_ns, e.end_ns);
  }
  runtime.measured_ms = static_cast<double>(last_ns - first_ns) / 1e6;
  const double ort_ms = event_ms(phase::runtime_load);
  if (!r.on_gpu) {
    runtime.floor_ms = ort_ms;
    runtime.basis = "ONNX Runtime's library load, as measured";
  } else {
    // A start that ran cuInit on its own (the fleet's) has it on the timeline; a sequential one ran
    // it inside the EP's registration, so cuInit as measured here is taken out of that.
    const bool own_init = event_ms(phase::cuda_init) > 0;
    const double init_ms = own_init ? event_ms(phase::cuda_init) : speeds.cuda_init_ms;
    const double context_ms = event_ms(phase::cuda_context) > 0 ? event_ms(phase::cuda_context) : speeds.cuda_context_ms;
    const double ep_ms = event_ms(phase::ep_library_load) +
                         std::max(0.0, event_ms(phase::ep_register) - (own_init ? 0.0 : speeds.cuda_init_ms));
    const double ep_side = ort_ms + ep_ms;
    const double cuda_side = init_ms + context_ms;
    runtime.floor_ms = std::max(ep_side, cuda_side);
    runtime.basis = fmt::format("max(ONNX Runtime + EP load and registration {:.0f} ms, cuInit {:.0f} ms + context {:.0f} ms){}",
                                ep_side, init_ms, context_ms, own_init ? "" : " (cuInit measured apart)");
  }

  // Session: the weights moved once at the machine's measured speed; the rest of session creation
  // (graph work, kernels, planning) has no floor of its own.
  FloorTerm session{"session", "session creation (weights)", 0, event_ms(phase::model_read) + event_ms(phase::weights_upload) + event_ms(phase::session_create), ""};
  const double gb = static_cast<double>(r.initializer_bytes) / 1e9;
  const double speed = r.on_gpu ? speeds.upload_gb_per_s : speeds.read_gb_per_s;
  if (speed > 0) {
    session.floor_ms = gb / speed * 1e3;
    session.basis = fmt::format("{:.3f} GB of weights at {:.1f} GB/s ({})", gb, speed,
                                r.on_gpu ? "pinned host-to-device copy" : "the model's files read from the page cache");
  } else {
    session.basis = "bandwidth not measured: no floor for the weights";
  }

  // Inference: one call at its steady latency, plus the convolution search the first call of the
  // chosen mode does (measured: it is what the mode needs, not overhead).
  double first_ms = 0;
  for (const auto& e : events) {
    if (e.name == phase::warmup && (!e.args.count("run") || e.args.at("run") == "1")) {
      first_ms = e.duration_ms();
      break;
    }
  }
  const double search_ms = r.on_gpu ? std::max(0.0, r.conv_first_ms - r.conv_steady_ms) : 0.0;
  FloorTerm inference{"inference", "first inference", r.steady_p50_ms + search_ms, first_ms,
                      search_ms > 0 ? fmt::format("steady p50 + conv first calls {:.0f} ms", search_ms) : "steady p50"};

  r.floor = {process, runtime, session, inference};
  r.floor_ms = 0;
  for (const auto& t : r.floor) r.floor_ms += t.floor_ms;
}

MachineSpeeds measure_machine_speeds(const Device& device, const std::string& model, uint64_t weight_bytes) {
  MachineSpeeds speeds;
  try {
    if (device.is_gpu()) {
      auto& driver = detail::CudaDriver::instance();
      if (!driver.ok()) return speeds;
      speeds.cuda_init_ms = driver.init_ms();
      const int ordinal = cuda_ordinal(device);
      const bool made = driver.holds_context(ordinal);
      const auto start = std::chrono::steady_clock::now();
      const detail::CudaDriver::PrimaryContext context(ordinal);
      if (!made) speeds.cuda_context_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      // Large enough to reach the bus's speed, small enough to fit beside anything else on the GPU.
      const size_t bytes = std::clamp<uint64_t>(weight_bytes, uint64_t{64} << 20, uint64_t{512} << 20);
      speeds.upload_gb_per_s = driver.pinned_upload_gb_per_s(ordinal, bytes);
      return speeds;
    }
    // The CPU's weights term: the model's files read again, as ONNX Runtime reads them after the start.
    std::vector<std::string> files = {model};
    if (fs::exists(model + ".data")) files.push_back(model + ".data");
    std::vector<char> buffer(size_t{4} << 20);
    uint64_t bytes = 0;
    double seconds = 0;
    for (int pass = 0; pass < 2; ++pass) {  // the first pass brings them into the page cache
      bytes = 0;
      const auto start = std::chrono::steady_clock::now();
      for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
          bytes += static_cast<uint64_t>(in.gcount());
        }
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    speeds.read_gb_per_s = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0;
  } catch (const std::exception& e) {
    spdlog::debug("could not measure the machine's speeds for the floor: {}", e.what());
  }
  return speeds;
}

namespace {
json shape_switch_json(const ShapeSwitchCost& c) {
  return {{"call_ms", c.call_ms}, {"steady_call_ms", c.steady_call_ms}, {"cost_ms", c.cost_ms}};
}

/// The floor's terms and the speeds they came from.
json floor_json(const ProfileReport& r) {
  json terms = json::array();
  for (const auto& t : r.floor) {
    terms.push_back({{"name", t.name}, {"label", t.label}, {"floor_ms", t.floor_ms}, {"measured_ms", t.measured_ms},
                     {"ratio", t.ratio()}, {"basis", t.basis}});
  }
  return json{{"terms", terms},
              {"upload_gb_per_s", r.speeds.upload_gb_per_s},
              {"read_gb_per_s", r.speeds.read_gb_per_s},
              {"cuda_init_ms", r.speeds.cuda_init_ms},
              {"cuda_context_ms", r.speeds.cuda_context_ms}};
}
}  // namespace

std::string ProfileReport::to_json() const {
  json phases_json = json::array();
  for (const auto& p : phases) {
    phases_json.push_back({{"name", p.name}, {"label", p.label}, {"ms", p.ms}, {"share", p.share}, {"detail", p.detail}, {"advice", p.advice}});
  }
  json transformers_json = json::array();
  for (const auto& [n, ms] : transformers) transformers_json.push_back({{"name", n}, {"ms", ms}});
  json nodes_json = json::array();
  for (const auto& n : nodes) {
    nodes_json.push_back({{"node", n.node}, {"op", n.op}, {"provider", n.provider}, {"first_ms", n.first_ms}, {"steady_ms", n.steady_ms}});
  }
  return json{{"ortfleet_profile", 1},
              {"model", model},
              {"device", device},
              {"config", json::parse(config.to_json())},
              {"wall_ms", wall_ms},
              {"attributed_ms", attributed_ms},
              {"attributed_share", attributed_share()},
              {"phases", phases_json},
              {"top_costs", top_costs},
              {"dynamic_dims", dynamic_dims},
              {"shapes_advice", shapes_advice},
              {"graph_transformers", transformers_json},
              {"nodes_first_run", nodes_json},
              {"conv_nodes", conv_nodes},
              {"conv_first_run_ms", conv_first_ms},
              {"conv_steady_ms", conv_steady_ms},
              {"placement", placement},
              {"cpu_fallback_ops", cpu_fallback},
              {"memcpy_nodes", memcpy_nodes},
              {"initializer_bytes", initializer_bytes},
              {"upload_gb_per_s", upload_gb_per_s},
              {"steady_p50_ms", steady_p50_ms},
              {"steady_p99_ms", steady_p99_ms},
              {"ort_profile", ort_profile_path},
              {"timeline", json::parse(timeline.to_json())},
              {"floor", floor_json(*this)},
              {"shape_switch", shape_switch_json(shape_switch)},
              {"floor_ms", floor_ms},
              {"floor_ratio", floor_ratio()}}
      .dump(2);
}

ShapeSwitchCost measure_shape_switch(const std::string& model, const std::vector<std::string>& dynamic_dims, const Device& device,
                                     const RunConfig& config, double seconds, const std::string& ort_library) {
  ShapeSwitchCost cost;
  const bool dynamic_batch = std::any_of(dynamic_dims.begin(), dynamic_dims.end(),
                                         [](const std::string& d) { return d.find("[0]") != std::string::npos; });
  if (!dynamic_batch || seconds <= 0) return cost;
  ThroughputOptions t;
  t.model = model;
  t.devices = {device};
  t.seconds = seconds;
  t.config = config;
  t.ort_library = ort_library;
  t.shape_mix = {1, 2};
  t.anchors = false;
  const ThroughputReport mix = run_throughput(t);
  // Rows: batch 1 alone, batch 2 alone, then one session on the alternating mix (every call a switch).
  if (mix.rows.size() < 3) return cost;
  for (size_t i = 0; i < 3; ++i) {
    if (!mix.rows[i].error.empty()) throw Error("the shape-switch measurement failed: " + mix.rows[i].error, {}, device.to_string());
  }
  cost.steady_call_ms = (mix.rows[0].p50_ms + mix.rows[1].p50_ms) / 2;
  cost.call_ms = mix.rows[2].p50_ms;
  cost.cost_ms = std::max(0.0, cost.call_ms - cost.steady_call_ms);
  return cost;
}

ProfileReport run_profile(const ProfileOptions& options) {
  const ProfileOptions& o = options;
  const ModelFacts facts = inspect_model(o.model);
  const std::string ortfleet = detail::ortfleet_executable(o.ortfleet_executable);
  // The child writes ONNX Runtime's profile and log here: a folder nobody else can plant files or
  // symlinks in, removed at the end unless the user asked to keep it (--keep).
  const detail::PrivateDir work = o.work_dir.empty()
                                      ? detail::PrivateDir::temporary("ortfleet-profile")
                                      : detail::PrivateDir::named(o.work_dir, "Give --keep a folder only you can write");
  const fs::path& dir = work.path();
  const std::string log_path = (dir / "ort-log.jsonl").string();
  detail::ColdStartRequest request;
  request.model = o.model;
  request.devices = {o.device};
  request.strategy = "sequential";
  request.warmup_runs = 1 + o.steady_runs;
  request.config = o.config;
  request.arguments = {"--profile-dir", dir.string(), "--ort-log", log_path};
  request.ortfleet_executable = ortfleet;
  request.ort_library = o.ort_library;
  request.timeout_s = o.timeout_s;
  const detail::ColdStart child = detail::run_cold_start(request);
  if (!child.ok()) throw Error("the profiled start failed: " + child.error, {}, o.device.to_string());
  const StartReport& start = *child.report;
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read " + path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string profile_path = start.devices.front().profile_path;
  auto report = build_profile(start, read_ort_log(log_path),
                              profile_path.empty() ? std::vector<OrtProfileEvent>{} : parse_ort_profile(read(profile_path), profile_path), facts);
  report.config = o.config;
  add_floor(report, measure_machine_speeds(o.device, o.model, facts.initializer_bytes));
  report.shape_switch = measure_shape_switch(o.model, facts.dynamic_dims, o.device, o.config, o.shape_switch_seconds, o.ort_library);
  if (!work.removed_at_end()) report.ort_profile_path = profile_path;  // a temporary one is gone when we return
  return report;
}

}  // namespace ortfleet
