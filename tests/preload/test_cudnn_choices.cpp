// libortfleet_cudnn.so against a stand-in cuDNN (fake_cudnn.cpp) that a program uses as ONNX Runtime's
// CUDA EP does (cudnn_user.cpp): a first process runs cuDNN's heuristics and records what ran; a later
// one answers the same query from the record, without heuristics; a record cuDNN refuses, or whose plan
// does not build, gives way to cuDNN's own query, and the run goes on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "process/child_process.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
struct ChildRun {
  int exit_code = -1;
  std::string log;      // what the stand-in cuDNN did
  nlohmann::json report;  // what the preloaded library says it did
};

class CudnnChoices : public ::testing::Test {
 protected:
  fs::path dir_ = test::fresh_dir("cudnn-choices");
  fs::path store_ = dir_ / "store";

  /// cudnn_user against the stand-in cuDNN in `cudnn_dir` (the plain one, or cuDNN 9's dispatcher layout).
  ChildRun run(bool preload, const std::string& cudnn_dir = ORTFLEET_TEST_FAKE_CUDNN_DIR) {
    if (!fs::exists(store_)) fs::create_directories(store_);
    const fs::path log = dir_ / "cudnn.log";
    fs::remove(log);
    std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", cudnn_dir},
                                              {"FAKE_CUDNN_LOG", log.string()},
                                              {"ORTFLEET_CUDNN_CHOICES", store_.string()},
                                              {"ORTFLEET_TEST_CUDNN_DEVICE", "Fake_GPU-sm00"}};
    if (preload) env["LD_PRELOAD"] = test::bin("libortfleet_cudnn.so");
    const auto child = detail::run_child({test::bin("ortfleet_test_cudnn_user")}, env, "{", 60);
    ChildRun r;
    r.exit_code = child.exit_code;
    r.log = test::read_all(log);
    if (!child.report_line.empty()) r.report = nlohmann::json::parse(child.report_line);
    return r;
  }
  fs::path store_file() const { return store_ / "Fake_GPU-sm00-cudnn91900.txt"; }
  void write_store(const std::string& choice) {
    // The record the first run made, its choice replaced.
    std::string key = test::read_all(store_file()).substr(0, test::read_all(store_file()).find(' '));
    std::ofstream(store_file()) << key << " " << choice << "\n";
  }
};
}  // namespace

TEST_F(CudnnChoices, AFirstProcessRecordsWhatRanAndALaterOneSkipsTheHeuristics) {
  const ChildRun first = run(/*preload=*/true);
  ASSERT_EQ(first.exit_code, 0);
  EXPECT_EQ(first.log, "heuristics 1\nexecute 10\n");
  EXPECT_EQ(first.report.value("recorded", -1), 1);
  EXPECT_EQ(first.report.value("replayed", -1), 0);
  const std::string record = test::read_all(store_file());
  EXPECT_NE(record.find(" 10 5=100\n"), std::string::npos) << record;  // engine 10, its knob 5 at 100

  const ChildRun later = run(/*preload=*/true);
  ASSERT_EQ(later.exit_code, 0);
  EXPECT_EQ(later.log, "execute 10\n") << "the same engine, without cuDNN's heuristics";
  EXPECT_EQ(later.report.value("replayed", -1), 1);
  EXPECT_EQ(later.report.value("recorded", -1), 0);
  EXPECT_EQ(test::read_all(store_file()), record) << "nothing new to record";

  const ChildRun without = run(/*preload=*/false);
  ASSERT_EQ(without.exit_code, 0);
  EXPECT_EQ(without.log, "heuristics 1\nexecute 10\n");
}

// cuDNN 9's libcudnn.so.9 looks each name up again in its sub-library and calls what dlsym gives it,
// which is this library's function: that must lead on to the sub-library's, not back (4xH200-final's crash:
// SIGSEGV in every GPU worker's init, the stack used up by the loop).
TEST_F(CudnnChoices, CudnnsDispatcherThatLooksItsNamesUpAgainDoesNotCallBackIntoItself) {
  const ChildRun first = run(/*preload=*/true, ORTFLEET_TEST_FAKE_CUDNN_DISPATCHER_DIR);
  ASSERT_EQ(first.exit_code, 0) << first.log;
  EXPECT_EQ(first.log, "heuristics 1\nexecute 10\n");
  EXPECT_EQ(first.report.value("recorded", -1), 1);
  const ChildRun later = run(/*preload=*/true, ORTFLEET_TEST_FAKE_CUDNN_DISPATCHER_DIR);
  ASSERT_EQ(later.exit_code, 0) << later.log;
  EXPECT_EQ(later.log, "execute 10\n") << "replayed through the dispatcher, without heuristics";
  EXPECT_EQ(later.report.value("replayed", -1), 1);
}

TEST_F(CudnnChoices, TheRecordDecidesTheEngine) {
  ASSERT_EQ(run(true).exit_code, 0);
  write_store("11 5=101");
  const ChildRun r = run(true);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.log, "execute 11\n");
}

TEST_F(CudnnChoices, ARecordCudnnRefusesGivesWayToItsOwnQuery) {
  ASSERT_EQ(run(true).exit_code, 0);
  write_store("99 5=100");  // an engine this cuDNN does not have
  const ChildRun r = run(true);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n");
  EXPECT_EQ(r.report.value("refused", -1), 1);
}

TEST_F(CudnnChoices, ARecordWhosePlanDoesNotBuildGivesWayToItsOwnQuery) {
  ASSERT_EQ(run(true).exit_code, 0);
  write_store("12 5=999");  // the engine builds, its plan does not
  const ChildRun r = run(true);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n");
  EXPECT_EQ(r.report.value("refused", -1), 1);
}

TEST_F(CudnnChoices, AStoreThatCannotBeWrittenKeepsNothingAndBreaksNothing) {
  std::ofstream(store_) << "a file where the store's folder should be";
  for (int i = 0; i < 2; ++i) {
    const ChildRun r = run(true);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n") << "run " << i;
  }
}

}  // namespace ortfleet
