#include <gtest/gtest.h>

#include "ortfleet/base/units.hpp"

namespace ortfleet {

TEST(Units, DurationsKeepThreeDigitsInTheUnitThatReadsBest) {
  EXPECT_EQ(duration_text(0.085), "85.0 us");
  EXPECT_EQ(duration_text(1.4), "1.40 ms");
  EXPECT_EQ(duration_text(11.2), "11.2 ms");  // the Markdown export wrote "0.01 s"
  EXPECT_EQ(duration_text(850), "850 ms");
  EXPECT_EQ(duration_text(1234), "1.23 s");
  EXPECT_EQ(duration_text(123'000), "2 min 3 s");
}

TEST(Units, SizesAndLargeCounts) {
  EXPECT_EQ(bytes_text(206), "206 B");
  EXPECT_EQ(bytes_text(50'600), "50.6 kB");  // not "0.00 GB"
  EXPECT_EQ(bytes_text(1'500), "1.50 kB");
  EXPECT_EQ(bytes_text(102'000'000), "102 MB");
  EXPECT_EQ(bytes_text(1'270'000'000), "1.27 GB");
  EXPECT_EQ(magnitude_text(0), "0");  // not "0.0 M"
  EXPECT_EQ(magnitude_text(5733), "5733");
  EXPECT_EQ(magnitude_text(12'345), "12.3 thousand");
  EXPECT_EQ(magnitude_text(25'557'032), "25.6 million");
}

TEST(Units, CountsTakeTheirNounInTheRightNumber) {
  EXPECT_EQ(count_text(1, "session"), "1 session");  // not "1 sessions"
  EXPECT_EQ(count_text(0, "session"), "0 sessions");
  EXPECT_EQ(count_text(2, "entry", "entries"), "2 entries");
  EXPECT_EQ(count_text(1, "entry", "entries"), "1 entry");
}

}  // namespace ortfleet
