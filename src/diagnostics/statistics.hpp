#pragma once
// The few statistics every measurement of ortfleet reports.
#include <vector>

namespace ortfleet {

/// min/median/max of samples (median of an even count: mean of the middle two).
struct Summary {
  double min = 0, median = 0, max = 0;
};
Summary summarize(std::vector<double> samples);
double percentile(std::vector<double> samples, double p);

}  // namespace ortfleet
