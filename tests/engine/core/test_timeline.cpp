#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/timeline.hpp"

namespace ortfleet {
using nlohmann::json;

TEST(Timeline, ScopesRecordPhasesInOrderPerLane) {
  Timeline t;
  {
    auto a = t.scope("first", "cuda:0");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    auto b = t.scope("second", "cuda:1");
    b.arg("bytes", "42");
  }
  const auto events = t.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "first");
  EXPECT_GE(events[0].duration_ms(), 4.0);
  EXPECT_LE(events[0].end_ns, events[1].start_ns);
  EXPECT_EQ(events[1].args.at("bytes"), "42");
  EXPECT_GT(events[0].pid, 0);
  EXPECT_NEAR(t.span_ms(), static_cast<double>(events[1].end_ns - events[0].start_ns) / 1e6, 1e-6);
  EXPECT_EQ(t.phase_totals_ms("cuda:1").count("first"), 0u);
}

TEST(Timeline, AScopeLeftByAnExceptionIsMarkedFailed) {
  Timeline t;
  try {
    auto s = t.scope("doomed", "cpu");
    throw std::runtime_error("x");
  } catch (const std::runtime_error&) {
  }
  ASSERT_EQ(t.events().size(), 1u);
  EXPECT_EQ(t.events()[0].args.at("failed"), "true");
}

TEST(Timeline, JsonRoundTrip) {
  Timeline t(1000);
  t.add({"a", "cpu", 2000, 5000, 7, {{"k", "v"}}});
  const Timeline back = Timeline::from_json(t.to_json());
  ASSERT_EQ(back.events().size(), 1u);
  EXPECT_EQ(back.origin_ns(), 1000);
  EXPECT_EQ(back.events()[0].end_ns, 5000);
  EXPECT_EQ(back.events()[0].args.at("k"), "v");
  EXPECT_EQ(back.events()[0].pid, 7);
}

TEST(Timeline, MalformedJsonIsRejectedClearly) {
  for (const char* bad : {"", "[]", R"({"origin_ns": 0})", R"({"origin_ns": 0, "events": [{"name": "x"}]})",
                          R"({"origin_ns": 0, "events": [{"name": "x", "lane": "l", "start_ns": 5, "end_ns": 1}]})"}) {
    try {
      Timeline::from_json(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("malformed timeline JSON"), std::string::npos);
      EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    }
  }
}

TEST(Timeline, ChromeTraceNamesLanesAndUsesMicroseconds) {
  Timeline t(1'000'000);
  t.add({"session.create", "cuda:0", 3'000'000, 5'000'000, 11, {}});
  t.add({"warmup", "cuda:1", 4'000'000, 6'000'000, 12, {}});
  const json trace = json::parse(t.to_chrome_trace());
  int complete = 0;
  int names = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ++complete;
      EXPECT_GE(e.at("ts").get<double>(), 0.0);
      if (e.at("name") == "session.create") {
        EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 2000.0);
        EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2000.0);
      }
    }
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++names;
  }
  EXPECT_EQ(complete, 2);
  EXPECT_EQ(names, 2);
}

}  // namespace ortfleet
