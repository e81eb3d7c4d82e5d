#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/ort_log.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(OrtLog, AnUnwritablePathIsAClearErrorAndLeaksNothing) {
  // The capture once held a raw pointer that its constructor leaked on this path (ASan: tsan/asan presets).
  try {
    OrtLogCapture capture("/nonexistent/folder/ort-log.jsonl");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write /nonexistent/folder/ort-log.jsonl: no such folder (/nonexistent/folder)"), std::string::npos);
  }
}

TEST(OrtLog, WritesOneJsonLinePerMessage) {
  const auto path = (test::scratch_dir() / "ort-log.jsonl").string();
  {
    OrtLogCapture capture(path);
  }
  std::ifstream in(path);
  EXPECT_TRUE(in.good());
}

}  // namespace ortfleet

namespace ortfleet {

namespace {
/// Sets the warning mode while it lives; then the default again (the log state is the process's).
class WarningMode {
 public:
  explicit WarningMode(detail::OrtWarningMode mode) { detail::set_ort_warning_mode(mode); }
  ~WarningMode() {
    detail::print_ort_warnings();
    detail::set_ort_warning_mode(detail::OrtWarningMode::first_each);
  }
  WarningMode(const WarningMode&) = delete;
  WarningMode& operator=(const WarningMode&) = delete;
};

void warn(const std::string& message) { detail::note_ort_log(ORT_LOGGING_LEVEL_WARNING, "onnxruntime", "cuda:0", "graph.cc", message.c_str()); }
}  // namespace

TEST(OrtWarnings, ATallyCountsEachMessageAndRemembersWhatItSaw) {
  detail::OrtWarningTally tally;
  EXPECT_TRUE(tally.note("a"));
  EXPECT_FALSE(tally.note("a", 2));
  EXPECT_TRUE(tally.note("b"));
  EXPECT_EQ(tally.take(), (std::vector<detail::OrtWarningCount>{{"a", 3}, {"b", 1}}));
  EXPECT_TRUE(tally.take().empty());
  EXPECT_FALSE(tally.note("a"));  // seen before, though taken
  EXPECT_EQ(tally.take(), (std::vector<detail::OrtWarningCount>{{"a", 1}}));
}

// The default (a library's user): the first of each warning is printed as it comes, repeats (from
// other sessions, or handed over by worker processes) are not.
TEST(OrtWarnings, ByDefaultTheFirstOfEachIsPrintedAndRepeatsAreNot) {
  const test::CapturedLog log;
  const std::string message = "Some nodes were not assigned to the preferred execution providers (first-each test)";
  for (int i = 0; i < 3; ++i) warn(message);
  detail::add_ort_warnings({{message, 5}});
  EXPECT_EQ(log.count(message), 1u) << log.text();
  EXPECT_EQ(log.count("onnxruntime: " + message), 1u) << log.text();
}

// A command holds them and says each once at its end, with how often it came: a 2-GPU bench of a
// transformer printed the same warning 24 times before its table.
TEST(OrtWarnings, ACommandSaysEachOnceWithItsCount) {
  const test::CapturedLog log;
  const std::string nodes = "Some nodes were not assigned to the preferred execution providers (command test)";
  const std::string other = "Another warning (command test)";
  {
    const WarningMode held(detail::OrtWarningMode::at_the_end);
    for (int i = 0; i < 4; ++i) warn(nodes);
    detail::add_ort_warnings({{nodes, 20}, {other, 1}});  // from the workers
    EXPECT_EQ(log.count(nodes), 0u) << "held until the end: " << log.text();
    print_ort_warnings();
  }
  EXPECT_EQ(log.count("onnxruntime (24 times): " + nodes), 1u) << log.text();
  EXPECT_EQ(log.count("onnxruntime: " + other), 1u) << log.text();
  EXPECT_EQ(log.count(nodes), 1u) << log.text();
}

// A run that fails comes back as the run's error; ONNX Runtime's own log line of it (with its source
// file, element_wise_ops.h) went to stderr beside it, in Python too: it is a debug record now.
TEST(OrtLog, ARunsFailureLineIsLeftToTheRunsErrorAndOtherErrorsArePrinted) {
  const test::CapturedLog log;
  const std::string failed_run = "Non-zero status code returned while running Add node. Name:'/Add' Status Message: "
                                 "element_wise_ops.h:560 Attempting to broadcast an axis by a dimension other than 1. 10 by 9";
  detail::note_ort_log(ORT_LOGGING_LEVEL_ERROR, "onnxruntime", "", "sequential_executor.cc", failed_run.c_str());
  EXPECT_EQ(log.count("Attempting to broadcast"), 0u) << log.text();
  detail::note_ort_log(ORT_LOGGING_LEVEL_ERROR, "onnxruntime", "", "graph.cc", "an error of another kind (run-failure test)");
  EXPECT_EQ(log.count("onnxruntime: an error of another kind (run-failure test)"), 1u) << log.text();
}

}  // namespace ortfleet
