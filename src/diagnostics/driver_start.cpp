// The CUDA driver's start in a fleet's start, from its timeline: each worker's cuInit and contexts,
// their overlap and their share of the fleet's time.
#include "ortfleet/diagnostics/driver_start.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "ortfleet/base/units.hpp"

namespace ortfleet {

namespace {

/// The length of the union of `spans` (ns).
int64_t union_ns(std::vector<std::pair<int64_t, int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  int64_t total = 0;
  int64_t open_begin = 0;
  int64_t open_end = 0;
  bool open = false;
  for (const auto& [begin, end] : spans) {
    if (open && begin <= open_end) {
      open_end = std::max(open_end, end);
      continue;
    }
    if (open) total += open_end - open_begin;
    open_begin = begin;
    open_end = end;
    open = true;
  }
  if (open) total += open_end - open_begin;
  return total;
}

double ms_between(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

}  // namespace

DriverStart driver_start_of(const Timeline& timeline, int64_t spawn_ns, int64_t ready_ns) {
  DriverStart out;
  out.fleet_ms = ms_between(spawn_ns, ready_ns);
  std::map<int, DriverWorker> by_pid;
  std::map<int, std::pair<int64_t, int64_t>> bounds;  // pid -> first begin, last end (ns)
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t last_context_ns = spawn_ns;
  for (const auto& e : timeline.events()) {
    const bool init = e.name == phase::cuda_init;
    const bool context = e.name == phase::cuda_context;
    if (!init && !context) continue;
    DriverWorker& w = by_pid[e.pid];
    w.pid = e.pid;
    if (w.lanes.find(e.lane) == std::string::npos) w.lanes += (w.lanes.empty() ? "" : ", ") + e.lane;
    (init ? w.init_ms : w.context_ms) += e.duration_ms();
    if (context) {
      ++w.contexts;
      ++out.gpus;
      last_context_ns = std::max(last_context_ns, e.end_ns);
    }
    auto [it, first] = bounds.try_emplace(e.pid, e.start_ns, e.end_ns);
    if (!first) it->second = {std::min(it->second.first, e.start_ns), std::max(it->second.second, e.end_ns)};
    spans.emplace_back(e.start_ns, e.end_ns);
  }
  for (auto& [pid, w] : by_pid) {
    w.begin_ms = ms_between(spawn_ns, bounds[pid].first);
    w.end_ms = ms_between(spawn_ns, bounds[pid].second);
    out.total_ms += w.driver_ms();
    out.workers.push_back(w);
  }
  std::stable_sort(out.workers.begin(), out.workers.end(), [](const DriverWorker& a, const DriverWorker& b) { return a.begin_ms < b.begin_ms; });
  out.span_ms = static_cast<double>(union_ns(spans)) / 1e6;
  out.last_context_ms = ms_between(spawn_ns, last_context_ns);
  return out;
}

std::string DriverStart::summary() const {
  if (!measured()) return {};
  double least = workers.front().driver_ms();
  double most = least;
  for (const auto& w : workers) {
    least = std::min(least, w.driver_ms());
    most = std::max(most, w.driver_ms());
  }
  const size_t n = workers.size();
  const std::string who = n == 1 ? fmt::format("cuInit and {} in one process", count_text(static_cast<uint64_t>(gpus), "CUDA context"))
                                 : fmt::format("cuInit and a CUDA context in each of {} worker processes", n);
  const std::string each = n == 1 ? duration_text(total_ms)
                                  : fmt::format("{} to {} a worker, {} in all", duration_text(least), duration_text(most), duration_text(total_ms));
  // How they overlapped: 1x is one after another (the driver serialises them), n x all at once.
  const std::string overlap_text =
      n == 1 ? std::string()
             : fmt::format("; they overlapped {:.2f}x of {} possible{}", overlap(), n,
                           overlap() < 1 + 0.25 * static_cast<double>(n - 1) ? " (mostly one after another: the driver serialises them)" : "");
  return fmt::format("the driver's start ({}): {}{}, so for {} of the fleet's {} ({:.0f}%) a process was inside it, and the last "
                     "context was made {} after exec. Every new process pays it; only a process that keeps its context avoids it: "
                     "a warm pool (the one a start leaves on the node, or `ortfleet serve`) starts the next job with no cuInit",
                     who, each, overlap_text, duration_text(span_ms), duration_text(fleet_ms), share() * 100, duration_text(last_context_ms));
}

std::string DriverStart::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : workers) {
    list.push_back({{"pid", w.pid}, {"lanes", w.lanes}, {"init_ms", w.init_ms}, {"context_ms", w.context_ms}, {"contexts", w.contexts},
                    {"begin_ms", w.begin_ms}, {"end_ms", w.end_ms}});
  }
  return nlohmann::json{{"workers", list},        {"total_ms", total_ms}, {"span_ms", span_ms},   {"fleet_ms", fleet_ms},
                        {"overlap", overlap()},   {"share", share()},     {"last_context_ms", last_context_ms},
                        {"gpus", gpus},           {"summary", summary()}}
      .dump();
}

}  // namespace ortfleet
