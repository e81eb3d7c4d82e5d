// bench's verdict: which cold start is fastest, by how much with its ±, which differences are noise,
// and what made a gain (the model cache, not the fleet's strategy, when the fleet without its cache
// is within noise of the row it beat).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "diagnostics/bench_rows.hpp"
#include "diagnostics/statistics.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/diagnostics/bench.hpp"

namespace ortfleet {

namespace {

/// "412 ms ± 12.0 ms": a row's mean ± σ over its rounds (no ± for one round).
std::string mean_text(const BenchRow& r) {
  const MeanSigma m = mean_sigma(r.wall_ms);
  return duration_text(m.mean) + (m.n >= 2 ? " ± " + duration_text(m.sigma) : std::string());
}

std::string rounds_text(size_t n) { return n == 1 ? "1 round" : fmt::format("{} rounds", n); }

/// Why two rows are within noise of each other, in words.
std::string noise_reason(const TimeRatio& t) { return t.ranges_overlap ? "their ranges overlap" : "the ± covers 1"; }

/// What made `fastest`'s gain over `other`, when `fastest` is the cached fleet and the bench also ran
/// the fleet without its cache: the cache's part and the strategy's, as a clause ("" when there is
/// nothing to part: no such row, or the cache changed nothing beyond noise).
std::string attribution(const BenchRow& fastest, const BenchRow& other, const std::vector<BenchRow>& rows, BenchComparison& comparison) {
  const BenchRow* uncached = detail::ran_row(rows, "fleet, no model cache");
  if (fastest.label != "fleet" || uncached == nullptr || other.label == uncached->label) return {};
  const TimeRatio cache = compare_times(fastest.wall_ms, uncached->wall_ms);
  if (!cache.noise_known || cache.within_noise || cache.ratio <= 1) return {};
  const TimeRatio strategy = compare_times(uncached->wall_ms, other.wall_ms);
  if (strategy.within_noise) {
    comparison.gain_from = "model cache";
    return fmt::format("; the model cache's gain: without it the fleet is within noise of {} ({})", other.label, strategy.text());
  }
  return fmt::format("; of it the model cache gives {} and the fleet's start without it {}", cache.text(), strategy.text());
}

}  // namespace

void detail::fill_times(BenchRow& row) {
  const Summary s = summarize(row.wall_ms);
  row.min_ms = s.min;
  row.median_ms = s.median;
  row.max_ms = s.max;
  const MeanSigma m = mean_sigma(row.wall_ms);
  row.mean_ms = m.mean;
  row.sigma_ms = m.sigma;
}

void detail::add_timed_round(BenchRow& row, const StartReport& start) {
  row.wall_ms.push_back(start.wall_ms());
  const Summary s = summarize(row.wall_ms);
  if (row.wall_ms.size() == 1 || std::abs(start.wall_ms() - s.median) <= std::abs(row.median_report.wall_ms() - s.median)) {
    row.median_report = start;
  }
}

const BenchRow* detail::ran_row(const std::vector<BenchRow>& rows, const std::string& label) {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const BenchRow& r) { return r.label == label && r.ok(); });
  return it == rows.end() ? nullptr : &*it;
}

BenchVerdict bench_verdict(const std::vector<BenchRow>& rows, int device_count, const std::string& devices) {
  BenchVerdict v;
  // The cold starts of every device: the cache's other states and the warm rows are the fleet's own
  // variants, set beside it in the notes.
  std::vector<const BenchRow*> cold;
  for (const auto& r : rows) {
    if (r.ok() && r.warm.empty() && r.model_cache.empty() && r.device_count == device_count) cold.push_back(&r);
  }
  if (cold.empty()) return v;
  std::stable_sort(cold.begin(), cold.end(),
                   [](const BenchRow* a, const BenchRow* b) { return mean_sigma(a->wall_ms).mean < mean_sigma(b->wall_ms).mean; });
  const BenchRow& fastest = *cold.front();
  v.fastest = fastest.label;
  size_t beyond = 0;
  for (size_t i = 1; i < cold.size(); ++i) {
    const BenchRow& other = *cold[i];
    const TimeRatio t = compare_times(fastest.wall_ms, other.wall_ms);
    BenchComparison c{other.label, t.ratio, t.sigma, t.noise_known, t.within_noise, ""};
    std::string line;
    if (!t.noise_known) {
      line = fmt::format("{} faster than {} ({}; one round: no spread, so the noise is not known)", t.text(), other.label, mean_text(other));
    } else if (t.within_noise) {
      line = fmt::format("within noise of {} ({}, {}; {})", other.label, mean_text(other), t.text(), noise_reason(t));
    } else {
      ++beyond;
      line = fmt::format("{} faster than {} ({})", t.text(), other.label, mean_text(other)) + attribution(fastest, other, rows, c);
    }
    v.lines.push_back(std::move(line));
    v.comparisons.push_back(std::move(c));
  }
  const size_t n = fastest.wall_ms.size();
  if (cold.size() == 1) {
    v.headline = fmt::format("start-up of {}: {}, {} ({}; nothing else ran to set it against)", devices, fastest.label, mean_text(fastest), rounds_text(n));
  } else if (beyond == 0 && std::all_of(v.comparisons.begin(), v.comparisons.end(), [](const BenchComparison& c) { return c.noise_known; })) {
    v.headline = fmt::format("no start-up of {} is faster than the others beyond noise ({} each): {} has the lowest mean, {}", devices,
                             rounds_text(n), fastest.label, mean_text(fastest));
  } else {
    v.headline = fmt::format("fastest start-up of {}: {}, {} ({}, mean ± σ)", devices, fastest.label, mean_text(fastest), rounds_text(n));
  }
  return v;
}

}  // namespace ortfleet
