// Where a start's time went: ortfleet's timeline, ONNX Runtime's log markers and its profiler's node
// events attributed to named phases (build_profile), each with its share of the wall time, the graph
// transformers' times, the first run's costliest nodes and the top costs with their advice.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/shapes/shape_policy.hpp"
#include "diagnostics/profile_advice.hpp"
#include "diagnostics/statistics.hpp"
#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/diagnostics/profile.hpp"

namespace ortfleet {

using detail::Advice;
using detail::advice_for;

namespace {

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

/// Adds phase `name` (from..to, our clock) to `r` with its label and advice; nothing when empty.
/// "of which cuDNN: heuristics 657 ms (0 of 160 queries answered from this machine's record), ...": the
/// first inference's cuDNN work, where the start's process had libortfleet_cudnn.so (a GPU start).
std::string cudnn_split(const TimelineEvent& first_run) {
  const auto arg = [&](const char* key) { return first_run.args.count(key) ? first_run.args.at(key) : std::string(); };
  if (arg("cudnn_queries").empty()) return {};
  return fmt::format("of which cuDNN: heuristics {} ms ({} of {} queries answered from this machine's record), engine configurations {} ms, "
                     "building plans {} ms",
                     arg("cudnn_heuristics_ms"), arg("cudnn_replayed"), arg("cudnn_queries"), arg("cudnn_engine_configs_ms"),
                     arg("cudnn_plan_build_ms"));
}

/// "1.27 GB at 12.3 GB/s", "50.6 kB": what an upload moved, and its speed where it is one worth saying.
std::string upload_text(double bytes, double gb_per_s) {
  const std::string moved = bytes_text(static_cast<uint64_t>(bytes));
  return gb_per_s >= 0.1 ? fmt::format("{} at {:.1f} GB/s", moved, gb_per_s) : moved;
}

/// Adds phase `name` (from..to, our clock; `spawn` is exec) to `r` with its label and advice, as a step
/// of `parent` when given; nothing when empty.
void add_phase(ProfileReport& r, int64_t spawn, const std::string& name, int64_t from, int64_t to, std::string detail = {},
               const std::string& parent = {}) {
  if (to <= from) return;
  const Advice& a = advice_for(name);
  ProfilePhase p;
  p.name = name;
  p.label = a.label[0] != '\0' ? a.label : name;
  p.start_ms = static_cast<double>(from - spawn) / 1e6;
  p.ms = static_cast<double>(to - from) / 1e6;
  p.detail = std::move(detail);
  p.advice = a.advice;
  p.parent = parent;
  p.actionable = a.actionable;
  r.phases.push_back(std::move(p));
}

/// The details a timeline phase carries: what the weights' upload moved and how fast.
std::string phase_detail(ProfileReport& r, const TimelineEvent& e) {
  if (e.name != phase::weights_upload) return {};
  // The cached graph's weights, uploaded by ortfleet in large copies before the session exists. Its
  // speed is that of the copies; finding the weights in the entry's files is named beside it.
  const double bytes = e.args.count("bytes") ? std::stod(e.args.at("bytes")) : 0;
  const double read_ms = e.args.count("read_ms") ? std::stod(e.args.at("read_ms")) : 0;
  const double seconds = e.args.count("copy_ms") ? std::stod(e.args.at("copy_ms")) / 1e3 : static_cast<double>(e.end_ns - e.start_ns) / 1e9;
  r.upload_gb_per_s = seconds > 0 ? bytes / 1e9 / seconds : 0;
  std::string detail = upload_text(bytes, r.upload_gb_per_s);
  if (e.args.count("initializers")) detail += fmt::format(", {} weights found in {:.0f} ms", e.args.at("initializers"), read_ms);
  return detail;
}

/// The start's own phases, exactly as its timeline has them (the same boundaries `ortfleet start`
/// shows), up to the first inference; and the gap from main() to the first of ortfleet's phases, which
/// is the command's own set-up (its arguments, config and device list).
void add_timeline_phases(ProfileReport& r, const std::vector<TimelineEvent>& events, const TimelineEvent& first_run, int64_t spawn, int64_t main_ns) {
  // The start's own `setup` phase is that gap: shown once, as tool.setup.
  const auto gap_or_edge = [](const TimelineEvent& e) { return e.name == phase::process_start || e.name == phase::ready || e.name == phase::setup; };
  int64_t first_ortfleet_ns = first_run.start_ns;
  for (const auto& e : events) {
    if (!gap_or_edge(e)) first_ortfleet_ns = std::min(first_ortfleet_ns, e.start_ns);
  }
  add_phase(r, spawn, "tool.setup", main_ns, first_ortfleet_ns);
  for (const auto& e : events) {
    if (e.name == phase::ready || e.name == phase::setup || e.start_ns >= first_run.end_ns) continue;
    if (e.name == phase::warmup && &e != &first_run) continue;  // the later inferences are the steady ones
    add_phase(r, spawn, e.name, e.start_ns, e.end_ns, phase_detail(r, e));
  }
}

/// The phases inside the session's creation, from ONNX Runtime's own log markers; `uploaded` when
/// ortfleet uploaded the weights before the session existed.
void add_session_phases(ProfileReport& r, const std::vector<OrtLogLine>& log, const TimelineEvent& create, const ModelFacts& facts, bool uploaded,
                        int64_t spawn) {
  const auto step = [&](const std::string& name, int64_t from, int64_t to, std::string detail = {}) {
    add_phase(r, spawn, name, from, to, std::move(detail), phase::session_create);
  };
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
    step("model.load", create.start_ns, t_init);
    step("session.setup", t_init, graph_begin);
    // Graph optimisation is the time inside transformers; the gaps between them (partitioning,
    // layout and memcpy insertion) count with what follows up to the session state.
    const auto optimisation_ns = static_cast<int64_t>(transformers_ms * 1e6);
    step("graph.optimization", graph_begin, graph_begin + optimisation_ns,
         r.transformers.empty() ? "" : fmt::format("largest: {} {}", r.transformers.front().first, duration_text(r.transformers.front().second)));
    step("partitioning", graph_begin + optimisation_ns, t_save);
    const double upload_s = static_cast<double>(t_saved - t_save) / 1e9;
    const double ort_upload_gb_per_s = upload_s > 0 ? static_cast<double>(facts.initializer_bytes) / 1e9 / upload_s : 0;
    if (uploaded) {
      // ortfleet uploaded the weights before: ONNX Runtime only placed the rest (shapes, scalars).
      step("initializer.upload", t_save, t_saved, "the initializers ortfleet did not upload (shapes, scalars)");
    } else if (!r.on_gpu) {
      // On the CPU nothing crosses a bus: the step places the weights, and a speed would mean nothing.
      step("initializer.upload", t_save, t_saved, bytes_text(facts.initializer_bytes));
    } else {
      r.upload_gb_per_s = ort_upload_gb_per_s;
      step("initializer.upload", t_save, t_saved, upload_text(static_cast<double>(facts.initializer_bytes), ort_upload_gb_per_s));
    }
    step("kernel.creation", t_saved, t_done);
    step("session.other", t_done, create.end_ns);
  } else {
    // The phase stays whole: ONNX Runtime's log lacked the markers to split it.
    for (auto& p : r.phases) {
      if (p.name == phase::session_create && p.parent.empty()) p.detail = "ONNX Runtime's log lacked the markers to split it";
    }
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

/// Each phase's share of the wall time, and the three largest costs the user can change, with their
/// advice: among the steps of a phase rather than the phase they split.
void rank_costs(ProfileReport& r) {
  for (auto& p : r.phases) {
    p.share = r.wall_ms > 0 ? p.ms / r.wall_ms : 0;
    if (p.parent.empty()) r.attributed_ms += p.ms;
  }
  const auto split = [&](const ProfilePhase& p) {
    return std::any_of(r.phases.begin(), r.phases.end(), [&](const ProfilePhase& c) { return c.parent == p.name; });
  };
  std::vector<const ProfilePhase*> order;
  for (const auto& p : r.phases) {
    if (p.actionable && !split(p)) order.push_back(&p);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
  for (size_t i = 0; i < order.size() && i < 3; ++i) {
    r.top_costs.push_back(fmt::format("{}: {} ({:.0f}%) - {}", order[i]->label, duration_text(order[i]->ms), order[i]->share * 100, order[i]->advice));
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

const ProfilePhase* ProfileReport::phase(const std::string& name) const {
  const auto it = std::find_if(phases.begin(), phases.end(), [&](const ProfilePhase& p) { return p.name == name; });
  return it == phases.end() ? nullptr : &*it;
}

ProfileReport build_profile(const StartReport& start, const std::vector<OrtLogLine>& log,
                            const std::vector<OrtProfileEvent>& ort_profile, const ModelFacts& facts) {
  ProfileReport r;
  r.model = start.model;
  if (start.devices.empty()) throw Error("the profiled start has no device");
  r.device = start.devices.front().device.to_string();
  r.on_gpu = detail::device_has(start.devices.front().device, detail::Capability::device_memory);
  r.initializer_bytes = facts.initializer_bytes;
  r.dynamic_dims = facts.dynamic_dims;
  if (!r.dynamic_dims.empty()) {
    r.shapes_advice = detail::shape_advice(start.devices.front().device) +
                      "; measure a stream of your shapes with 'ortfleet bench --inference --shape-mix' or '--shape-stream'";
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
  add_timeline_phases(r, events, *first_run, start.spawn_ns, proc ? proc->end_ns : start.main_ns);
  add_session_phases(r, log, *create, facts, find(phase::weights_upload) != nullptr, start.spawn_ns);
  // In order of occurrence, each step right under the phase it splits (which starts with it).
  std::stable_sort(r.phases.begin(), r.phases.end(), [](const ProfilePhase& a, const ProfilePhase& b) { return a.start_ms < b.start_ms; });
  add_node_costs(r, ort_profile, r.on_gpu);

  std::string warm_detail;
  if (r.conv_nodes > 0) {
    warm_detail = fmt::format("{} conv nodes: {:.0f} ms in this run vs {:.1f} ms later{}", r.conv_nodes, r.conv_first_ms, r.conv_steady_ms,
                              r.on_gpu ? " (cuDNN's plans and search, per session)" : "");
  }
  if (const auto cudnn = cudnn_split(*first_run); !cudnn.empty()) warm_detail += (warm_detail.empty() ? "" : "; ") + cudnn;
  for (auto& p : r.phases) {
    if (p.name != phase::warmup) continue;
    p.detail = warm_detail;
    // The advice of the first inference is the GPU's (cuDNN's plans and search): on the CPU it is the
    // kernels' first run and the memory they plan.
    if (!r.on_gpu) {
      p.advice = "every new ONNX Runtime session pays it: its kernels' first run and the memory they plan; a session a warm pool keeps "
                 "resident (the one a start leaves behind, or ortfleet serve) skips it";
    }
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

}  // namespace ortfleet
