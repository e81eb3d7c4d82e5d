#include "diagnostics/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

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

namespace {

/// Student's t density with `df` degrees of freedom.
double t_density(double t, int df) {
  const double v = df;
  return std::exp(std::lgamma((v + 1) / 2) - std::lgamma(v / 2)) / std::sqrt(v * std::numbers::pi) * std::pow(1 + t * t / v, -(v + 1) / 2);
}

/// P(T <= t) for t >= 0: 1/2 and the density integrated from 0 (Simpson's rule, fine enough for a bound).
double t_cdf_above_zero(double t, int df) {
  constexpr int kSteps = 2000;
  const double h = t / kSteps;
  double sum = t_density(0, df) + t_density(t, df);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 == 1 ? 4 : 2) * t_density(i * h, df);
  return 0.5 + sum * h / 3;
}

}  // namespace

double student_t_quantile(double p, int df) {
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0;
  double hi = 1;
  while (t_cdf_above_zero(hi, df) < p && hi < 1e6) hi *= 2;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (t_cdf_above_zero(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

PairedGain paired_gain(const std::vector<double>& base, const std::vector<double>& other, size_t comparisons) {
  PairedGain g;
  std::vector<double> logs;
  std::vector<double> b;  // the rounds measured on both sides
  std::vector<double> o;
  for (size_t k = 0; k < std::min(base.size(), other.size()); ++k) {
    if (base[k] <= 0 || other[k] <= 0) continue;
    b.push_back(base[k]);
    o.push_back(other[k]);
    logs.push_back(std::log(other[k] / base[k]));
    g.faster_in += other[k] < base[k] ? 1 : 0;
  }
  g.rounds = logs.size();
  if (g.rounds == 0) return g;
  const MeanSigma m = mean_sigma(logs);
  g.ratio = std::exp(m.mean);
  if (g.rounds < 3) return g;
  const double alpha = 0.05 / static_cast<double>(std::max<size_t>(1, comparisons));
  const double t = student_t_quantile(1 - alpha, static_cast<int>(g.rounds) - 1);
  g.upper_bound = std::exp(m.mean + t * m.sigma / std::sqrt(static_cast<double>(g.rounds)));
  // Ranges apart: of the C(2n, n) ways to deal 2n exchangeable times into two sets, one puts every
  // lowest time on one side.
  double ways = 1;
  for (size_t k = 1; k <= g.rounds; ++k) ways = ways * static_cast<double>(g.rounds + k) / static_cast<double>(k);
  g.ranges_apart = *std::max_element(o.begin(), o.end()) < *std::min_element(b.begin(), b.end()) && 1 / ways <= alpha;
  g.beyond_noise = g.faster_in == g.rounds && (g.upper_bound < 1 || g.ranges_apart);
  return g;
}

std::string PairedGain::text() const {
  if (rounds == 0) return "no round measured both";
  const std::string in = faster_in == rounds ? fmt::format("faster in each of its {} rounds", rounds)
                                             : fmt::format("faster in {} of {} rounds", faster_in, rounds);
  if (rounds < 3) return in + " (3 rounds or more tell a gain from noise)";
  return fmt::format("{} (paired ratio {:.2f}x, at most {:.2f}x{})", in, ratio, upper_bound, ranges_apart ? "; ranges apart" : "");
}

}  // namespace ortfleet
