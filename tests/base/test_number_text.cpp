// Numbers as a person types them, read one way everywhere: flags, environment variables, values.
#include <gtest/gtest.h>

#include "ortfleet/base/number_text.hpp"
#include "ortfleet/engine/options.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(NumberText, DecimalNumbersAreReadAndEverythingElseIsNot) {
  EXPECT_EQ(parse_decimal("300"), 300.0);
  EXPECT_EQ(parse_decimal("-2.5"), -2.5);
  EXPECT_EQ(parse_decimal("+0.5"), 0.5);
  EXPECT_EQ(parse_decimal(".5"), 0.5);
  EXPECT_EQ(parse_decimal("5."), 5.0);
  EXPECT_EQ(parse_decimal("1e3"), 1000.0);
  EXPECT_EQ(parse_decimal("2.5E-1"), 0.25);
  // strtod reads each of these as a number (16, 12, infinity, ...): none is one as typed here.
  for (const char* text : {"0x10", "0X1p4", "12abc", "inf", "nan", "infinity", " 5", "5 ", "", "-", "+", ".", "e3", "1e", "1e+", "+-5",
                           "1,5", "1e999", "--5", "5s"}) {
    EXPECT_FALSE(parse_decimal(text)) << "'" << text << "'";
  }
}

TEST(NumberText, WholeNumbersAreDigitsThatFit) {
  EXPECT_EQ(parse_whole("42"), 42);
  EXPECT_EQ(parse_whole("-7"), -7);
  EXPECT_EQ(parse_whole("+7"), 7);
  for (const char* text : {"0x10", "1.0", "1e3", "12abc", "", "+", "-", "+-5", " 1", "99999999999999999999"}) {
    EXPECT_FALSE(parse_whole(text)) << "'" << text << "'";
  }
}

// ORTFLEET_WARM_POOL_IDLE=0x10 was read as 16 s where every other bad value was refused.
TEST(NumberText, TheWarmPoolIdleVariableIsReadAsEveryNumberIs) {
  const WarmPoolOptions unset;
  for (const char* bad : {"0x10", "12abc", "inf", "-1", "604801", " 5"}) {
    const test::ScopedEnv env("ORTFLEET_WARM_POOL_IDLE", bad);
    const std::string e = test::error_of([&] { unset.chosen_idle_exit_s(); });
    EXPECT_EQ(e.rfind(std::string("ORTFLEET_WARM_POOL_IDLE='") + bad + "' is ", 0), 0u) << e;
    EXPECT_NE(e.find(": give a number of seconds from 0 to 604800"), std::string::npos) << e;
  }
  const test::ScopedEnv env("ORTFLEET_WARM_POOL_IDLE", "2.5");
  EXPECT_EQ(unset.chosen_idle_exit_s(), 2.5);
}

}  // namespace ortfleet
