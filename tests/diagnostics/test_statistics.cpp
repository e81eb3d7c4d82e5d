#include <gtest/gtest.h>

#include <cmath>

#include "diagnostics/statistics.hpp"

namespace ortfleet {

TEST(Statistics, SummaryAndPercentiles) {
  const Summary s = summarize({3, 1, 2, 10});
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.median, 2.5);
  EXPECT_EQ(s.max, 10);
  EXPECT_EQ(summarize({4, 2, 9}).median, 4);
  EXPECT_EQ(summarize({}).median, 0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 50), 3);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 100), 5);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 25), 12.5);
}

TEST(Statistics, MeanAndSigma) {
  const MeanSigma m = mean_sigma({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(m.mean, 5);
  EXPECT_NEAR(m.sigma, 2.138, 1e-3);  // the sample σ (n - 1)
  EXPECT_EQ(m.n, 8u);
  EXPECT_EQ(mean_sigma({3}).sigma, 0);
  EXPECT_EQ(mean_sigma({}).n, 0u);
}

TEST(Statistics, ADifferenceBeyondNoiseHasARatioAndItsSpread) {
  const TimeRatio t = compare_times({100, 102, 98, 101, 99}, {130, 133, 127, 131, 129});
  EXPECT_NEAR(t.ratio, 1.3, 1e-9);
  EXPECT_TRUE(t.noise_known);
  EXPECT_FALSE(t.ranges_overlap);
  EXPECT_FALSE(t.within_noise);
  // hyperfine's ±: the two means' relative σ in quadrature.
  EXPECT_NEAR(t.sigma, 1.3 * std::sqrt(std::pow(1.5811 / 100, 2) + std::pow(2.2361 / 130, 2)), 1e-3);
  EXPECT_EQ(t.text(), "1.30 ± 0.03x");
}

TEST(Statistics, OverlappingRangesAreWithinNoise) {
  // Three runs of the same detector gave each strategy first in turn: their ranges overlap.
  const TimeRatio t = compare_times({100, 140, 95, 120}, {110, 150, 105, 125});
  EXPECT_GT(t.ratio, 1.0);
  EXPECT_TRUE(t.ranges_overlap);
  EXPECT_TRUE(t.within_noise);
}

TEST(Statistics, ARatioWhoseSpreadCoversOneIsWithinNoiseEvenWithoutOverlap) {
  // Ranges apart by a hair, but a ± far larger than the difference of the means.
  const TimeRatio t = compare_times({100, 100, 100, 60}, {101, 101, 101, 101.5});
  EXPECT_FALSE(t.ranges_overlap);
  EXPECT_TRUE(t.within_noise);
}

TEST(Statistics, OneRoundKnowsNoNoise) {
  const TimeRatio t = compare_times({100}, {130});
  EXPECT_NEAR(t.ratio, 1.3, 1e-9);
  EXPECT_FALSE(t.noise_known);
  EXPECT_FALSE(t.within_noise);
  EXPECT_EQ(t.text(), "1.30x");
}

}  // namespace ortfleet
