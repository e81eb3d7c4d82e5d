// Fresh-process runs: how bench, profile and tune read a child's report and say why it failed.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stop_token>
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

// A child that closes its output and runs on was waited for until it ended, its timeout forgotten (the
// wait for its exit had none).
TEST(ChildProcess, AChildThatClosesItsOutputAndRunsOnIsKilledAtItsTime) {
  const auto r = run_child({"sh", "-c", "exec >&- 2>&-; exec sleep 30"}, {}, "", 0.5);
  EXPECT_TRUE(r.timed_out) << r.describe();
  EXPECT_EQ(r.signal, SIGKILL) << r.describe();
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

namespace ortfleet::detail {

namespace {
/// Running, not a zombie waiting to be reaped.
bool alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto state_at = text.rfind(") ");
  return state_at != std::string::npos && text.size() > state_at + 2 && text[state_at + 2] != 'Z';
}
}  // namespace

// A caller that can stop its child (Ctrl-C in Python's bench): the child leads a process group of its
// own, so a terminal's SIGINT reaches only the caller, and a stop ends it and what it started, in order.
TEST(ChildProcess, AStopEndsTheChildAndWhatItStartedAndATerminalsCtrlCReachesOnlyTheCaller) {
  std::stop_source stop;
  ChildResult r;
  std::thread runner([&] {
    r = run_child({"sh", "-c", "sleep 30 & echo \"R $$ $(ps -o pgid= $$) $!\"; wait"}, {}, "R", 60, stop.get_token());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop.request_stop();
  const auto asked = std::chrono::steady_clock::now();
  runner.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count(), 2.0) << "the stop took long";
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.describe().rfind("was stopped on request", 0), 0u) << r.describe();
  std::istringstream said(r.report_line.substr(2));
  int shell = 0;
  int group = 0;
  int grandchild = 0;
  said >> shell >> group >> grandchild;
  EXPECT_EQ(group, shell) << "the child leads a process group of its own";
  EXPECT_NE(group, static_cast<int>(::getpgrp())) << "a terminal's Ctrl-C to the caller's group would reach it";
  for (int i = 0; i < 50 && alive(grandchild); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(grandchild)) << "what the child started outlived the stop";
  // Without a stop that can be requested, nothing changes: the child stays in the caller's group.
  const auto plain = run_child({"sh", "-c", "echo \"R $(ps -o pgid= $$)\""}, {}, "R", 30);
  EXPECT_EQ(std::stoi(plain.report_line.substr(2)), static_cast<int>(::getpgrp()));
}

}  // namespace ortfleet::detail
