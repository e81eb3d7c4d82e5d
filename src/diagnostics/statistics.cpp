#include "diagnostics/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ortfleet {

Summary summarize(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  const double median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return {samples.front(), median, samples.back()};
}

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = static_cast<size_t>(std::ceil(rank));
  return samples[lo] + (samples[hi] - samples[lo]) * (rank - static_cast<double>(lo));
}

MeanSigma mean_sigma(const std::vector<double>& samples) {
  MeanSigma out;
  out.n = samples.size();
  if (samples.empty()) return out;
  double sum = 0;
  for (double s : samples) sum += s;
  out.mean = sum / static_cast<double>(out.n);
  if (out.n < 2) return out;
  double squares = 0;
  for (double s : samples) squares += (s - out.mean) * (s - out.mean);
  out.sigma = std::sqrt(squares / static_cast<double>(out.n - 1));
  return out;
}

std::string TimeRatio::text() const { return noise_known ? fmt::format("{:.2f} ± {:.2f}x", ratio, sigma) : fmt::format("{:.2f}x", ratio); }

TimeRatio compare_times(const std::vector<double>& base, const std::vector<double>& other) {
  TimeRatio out;
  const MeanSigma a = mean_sigma(base);
  const MeanSigma b = mean_sigma(other);
  if (a.n == 0 || b.n == 0 || a.mean <= 0) return out;
  out.ratio = b.mean / a.mean;
  out.noise_known = a.n >= 2 && b.n >= 2;
  if (!out.noise_known) return out;
  // The ratio's ± as hyperfine propagates it: the relative σ of the two means added in quadrature.
  out.sigma = out.ratio * std::sqrt(std::pow(a.sigma / a.mean, 2) + (b.mean > 0 ? std::pow(b.sigma / b.mean, 2) : 0.0));
  const Summary ra = summarize(base);
  const Summary rb = summarize(other);
  out.ranges_overlap = ra.min <= rb.max && rb.min <= ra.max;
  out.within_noise = out.ranges_overlap || std::fabs(out.ratio - 1) <= out.sigma;
  return out;
}

}  // namespace ortfleet
