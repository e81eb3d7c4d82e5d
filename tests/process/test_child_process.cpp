// Fresh-process runs: how bench, profile and tune read a child's report and say why it failed.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <thread>

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

namespace ortfleet::detail {

TEST(ChildProcess, AChildStartsWithTheStopSignalsUnblockedWhateverItsSpawnerBlocked) {
  // A pool server blocks SIGTERM and SIGINT in every thread; the workers it spawns must still stop.
  ChildResult r;
  std::thread spawner([&] {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    r = run_child({"sh", "-c", "echo \"R $(grep SigBlk /proc/self/status | cut -f2)\""}, {}, "R", 30);
  });
  spawner.join();
  ASSERT_EQ(r.report_line.rfind("R ", 0), 0u) << r.describe();
  const unsigned long long blocked = std::stoull(r.report_line.substr(2), nullptr, 16);
  EXPECT_EQ(blocked & (1ull << (SIGTERM - 1)), 0u) << r.report_line;
  EXPECT_EQ(blocked & (1ull << (SIGINT - 1)), 0u) << r.report_line;
}

}  // namespace ortfleet::detail
