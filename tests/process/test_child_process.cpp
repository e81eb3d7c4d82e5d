// Fresh-process runs: how bench, profile and tune read a child's report and say why it failed.
#include <gtest/gtest.h>

#include <csignal>

#include "process/child_process.hpp"

namespace ortfleet::detail {

TEST(ChildProcess, TheReportLineIsPickedOutAndTheExitCodeKept) {
  const auto r = run_child({"sh", "-c", "echo before; echo 'REPORT {\"x\": 1}'; echo 'went wrong' >&2; exit 3"}, {}, "REPORT", 30);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.report_line, "REPORT {\"x\": 1}");
  EXPECT_EQ(r.stdout_text, "before\n");
  EXPECT_EQ(r.describe(), "exited with code 3: went wrong");
}

TEST(ChildProcess, ExtraEnvironmentAndTheSpawnTimeReachTheChild) {
  const auto r = run_child({"sh", "-c", "echo \"R $ORTFLEET_TEST_VALUE $ORTFLEET_SPAWN_NS\""}, {{"ORTFLEET_TEST_VALUE", "seen"}}, "R", 30);
  EXPECT_EQ(r.report_line, "R seen " + std::to_string(r.spawn_ns));
}

TEST(ChildProcess, ACrashNamesItsSignal) {
  const auto r = run_child({"sh", "-c", "echo 'last words' >&2; kill -SEGV $$"}, {}, "", 30);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "was killed by signal SIGSEGV (Segmentation fault): last words");
}

TEST(ChildProcess, AChildPastItsTimeIsKilled) {
  const auto r = run_child({"sleep", "30"}, {}, "", 0.3);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.describe(), "timed out");
}

}  // namespace ortfleet::detail
