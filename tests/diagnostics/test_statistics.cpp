#include <gtest/gtest.h>

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

}  // namespace ortfleet
