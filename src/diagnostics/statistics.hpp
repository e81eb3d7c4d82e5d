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

}  // namespace ortfleet
