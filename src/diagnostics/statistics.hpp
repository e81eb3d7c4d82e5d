#pragma once
// The few statistics every measurement of ortfleet reports, and how two sets of times compare.
#include <cstddef>
#include <string>
#include <vector>

namespace ortfleet {

/// min/median/max of samples (median of an even count: mean of the middle two).
struct Summary {
  double min = 0, median = 0, max = 0;
};
Summary summarize(std::vector<double> samples);
double percentile(std::vector<double> samples, double p);

/// The mean of samples and their spread: the sample standard deviation σ (0 below two samples).
struct MeanSigma {
  double mean = 0;
  double sigma = 0;
  size_t n = 0;
};
MeanSigma mean_sigma(const std::vector<double>& samples);

/// How one set of times compares with another, as hyperfine says it: the ratio of their means with
/// its ± (each mean's relative σ combined), and whether the difference is within noise: their ranges
/// [min, max] overlap, or the ratio's ± reaches 1. With fewer than two samples on a side the noise
/// is not known: nothing is called within noise, and the text says there is no spread.
struct TimeRatio {
  double ratio = 0;  ///< the other's mean / this one's: 1.3 = the other takes 1.3 times as long
  double sigma = 0;  ///< the ratio's ±
  bool noise_known = false;
  bool ranges_overlap = false;
  bool within_noise = false;
  /// "1.31 ± 0.12x"; "1.31x" when the noise is not known.
  std::string text() const;
};
/// `other`'s times against `base`'s (both in the same unit). Empty sides compare as ratio 0.
TimeRatio compare_times(const std::vector<double>& base, const std::vector<double>& other);

/// Whether `other` is faster than `base` in a way that repeats, from times measured in the same
/// interleaved rounds (the k-th of each from the same round, so that a busy moment of the machine
/// touches both): `other` faster in every round, and either the one-sided bound of their paired ratio
/// (the geometric mean of each round's other / base, Student's t over the rounds) below 1, or every
/// time of `other` below every time of `base` (ranges apart: by chance once in C(2n, n)), at the
/// confidence that `comparisons` such tests together keep (Bonferroni: 95% for all of them, so that one
/// of many candidates winning by chance is not called a gain). Needs three rounds or more.
struct PairedGain {
  size_t rounds = 0;        ///< rounds with a time on both sides
  size_t faster_in = 0;     ///< rounds in which `other` was faster
  double ratio = 0;         ///< the geometric mean of the rounds' other / base
  double upper_bound = 0;   ///< the ratio's one-sided upper bound at that confidence
  bool ranges_apart = false;  ///< every time of `other` below every time of `base`, and as unlikely by chance as that confidence asks
  bool beyond_noise = false;
  /// "faster in each of its 5 rounds (paired ratio 0.81x, at most 0.88x)", "faster in 3 of 5 rounds".
  std::string text() const;
};
PairedGain paired_gain(const std::vector<double>& base, const std::vector<double>& other, size_t comparisons);

/// The p-quantile of Student's t distribution with `df` degrees of freedom (0 < p < 1, df >= 1).
double student_t_quantile(double p, int df);

}  // namespace ortfleet
