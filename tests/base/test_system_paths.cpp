#include "base/system_paths.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <time.h>

#include <fstream>

#include "test_support.hpp"

namespace ortfleet {
namespace {

// A file named after this pid that an earlier process of the same pid left in /tmp is not this
// process's (the telemetry check read such a log as "the uploader runs here").
TEST(SystemPaths, OnlyAFileWrittenSinceThisProcessStartedIsItsOwn) {
  const auto dir = test::fresh_dir("system-paths");
  const auto file = dir / "trace.log";
  EXPECT_FALSE(detail::written_since_this_process_started(file)) << "no file at all";
  std::ofstream(file) << "x";
  EXPECT_TRUE(detail::written_since_this_process_started(file));
  const struct timespec an_hour_before_now[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), an_hour_before_now, 0), 0);
  EXPECT_FALSE(detail::written_since_this_process_started(file)) << "left by an earlier process";
}

}  // namespace
}  // namespace ortfleet
