// libortfleet_cudnn.so against a stand-in cuDNN (fake_cudnn.cpp) that a program uses as ONNX Runtime's
// CUDA EP does (cudnn_user.cpp): a first process runs cuDNN's heuristics and records what ran; a later
// one answers the same query from the record, without heuristics; a record cuDNN refuses, or whose plan
// does not build, gives way to cuDNN's own query, and the run goes on.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cuda/cudnn_choices.hpp"
#include "process/child_process.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
/// A count of the library's report, -1 where it is missing. (Not json::value(key, -1): in some unity
/// batches GCC 12 reports a false null dereference inside it, -Werror.)
int count_in(const nlohmann::json& report, const char* key) {
  const auto it = report.find(key);
  return it == report.end() || !it->is_number_integer() ? -1 : static_cast<int>(it->get<int64_t>());
}
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
  ChildRun run(bool preload, const std::string& cudnn_dir = ORTFLEET_TEST_FAKE_CUDNN_DIR, double timeout_s = 60) {
    if (!fs::exists(store_)) fs::create_directories(store_);
    const fs::path log = dir_ / "cudnn.log";
    fs::remove(log);
    std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", cudnn_dir},
                                              {"FAKE_CUDNN_LOG", log.string()},
                                              {"ORTFLEET_CUDNN_CHOICES", store_.string()},
                                              {"ORTFLEET_TEST_CUDNN_DEVICE", "Fake_GPU-sm00"}};
    if (preload) env["LD_PRELOAD"] = test::bin("libortfleet_cudnn.so");
    const auto child = detail::run_child({test::bin("ortfleet_test_cudnn_user")}, env, "{", timeout_s);
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
  EXPECT_EQ(count_in(first.report, "recorded"), 1);
  EXPECT_EQ(count_in(first.report, "replayed"), 0);
  const std::string record = test::read_all(store_file());
  EXPECT_NE(record.find(" 10 5=100\n"), std::string::npos) << record;  // engine 10, its knob 5 at 100

  const ChildRun later = run(/*preload=*/true);
  ASSERT_EQ(later.exit_code, 0);
  EXPECT_EQ(later.log, "execute 10\n") << "the same engine, without cuDNN's heuristics";
  EXPECT_EQ(count_in(later.report, "replayed"), 1);
  EXPECT_EQ(count_in(later.report, "recorded"), 0);
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
  EXPECT_EQ(count_in(first.report, "recorded"), 1);
  const ChildRun later = run(/*preload=*/true, ORTFLEET_TEST_FAKE_CUDNN_DISPATCHER_DIR);
  ASSERT_EQ(later.exit_code, 0) << later.log;
  EXPECT_EQ(later.log, "execute 10\n") << "replayed through the dispatcher, without heuristics";
  EXPECT_EQ(count_in(later.report, "replayed"), 1);
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
  EXPECT_EQ(count_in(r.report, "refused"), 1);
}

TEST_F(CudnnChoices, ARecordWhosePlanDoesNotBuildGivesWayToItsOwnQuery) {
  ASSERT_EQ(run(true).exit_code, 0);
  write_store("12 5=999");  // the engine builds, its plan does not
  const ChildRun r = run(true);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n");
  EXPECT_EQ(count_in(r.report, "refused"), 1);
}

// A named pipe as the record file held the first convolution until someone wrote to it (issue 50); a
// link, a device or a folder at its name is left alone the same way: the run goes on, nothing is kept.
TEST_F(CudnnChoices, ARecordFileThatIsNotAFileIsLeftAloneAndNeverWaitedOn) {
  fs::create_directories(store_);
  const fs::path elsewhere = dir_ / "elsewhere.txt";
  struct Case {
    const char* what;
    std::function<void()> make;
  };
  const std::vector<Case> cases = {
      {"a named pipe", [&] { ASSERT_EQ(::mkfifo(store_file().c_str(), 0600), 0); }},
      {"a symbolic link", [&] { fs::create_symlink(elsewhere, store_file()); }},
      {"a folder", [&] { fs::create_directories(store_file()); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove_all(store_file());
    fs::remove(elsewhere);
    c.make();
    struct stat before {};
    ASSERT_EQ(::lstat(store_file().c_str(), &before), 0);
    for (int i = 0; i < 2; ++i) {
      const ChildRun r = run(/*preload=*/true, ORTFLEET_TEST_FAKE_CUDNN_DIR, /*timeout_s=*/20);
      ASSERT_EQ(r.exit_code, 0) << "run " << i << " did not end (it waited on the record file?)";
      EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n") << "run " << i;
      EXPECT_EQ(count_in(r.report, "replayed"), 0);
    }
    struct stat after {};
    ASSERT_EQ(::lstat(store_file().c_str(), &after), 0);
    EXPECT_EQ(after.st_mode, before.st_mode) << "what stands at the record's name was replaced";
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_FALSE(fs::exists(elsewhere)) << "the record was written through the link";
  }
  fs::remove_all(store_file());
}

TEST_F(CudnnChoices, AStoreThatCannotBeWrittenKeepsNothingAndBreaksNothing) {
  std::ofstream(store_) << "a file where the store's folder should be";
  for (int i = 0; i < 2; ++i) {
    const ChildRun r = run(true);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.log, "heuristics 1\nexecute 10\n") << "run " << i;
  }
}

// The record's folder (docs/guarantees.md): made 0700 and kept only where no other user can change it;
// a folder another user owns or may write, a link another user owns, or a file, pipe or device in its
// place keeps no choices, and is left as it was (a pipe is never opened).
TEST(CudnnChoicesFolder, OnlyAFolderOfThisUserIsUsedAndNothingElseIsTouched) {
  const std::string worker = test::bin("ortfleet-worker");
  const fs::path dir = test::fresh_dir("cudnn-choices-folder");
  const auto environment_for = [&](const fs::path& folder) {
    const test::ScopedEnv store("ORTFLEET_CUDNN_CHOICES", folder.string());
    return detail::cudnn_choices_environment(worker);
  };
  const auto made = environment_for(dir / "mine" / "choices");
  ASSERT_EQ(made.count("ORTFLEET_CUDNN_CHOICES"), 1u) << "libortfleet_cudnn.so is not beside " << worker;
  EXPECT_EQ(fs::status(dir / "mine" / "choices").permissions(), fs::perms::owner_all);
  EXPECT_NE(made.at("LD_PRELOAD").find("libortfleet_cudnn.so"), std::string::npos);

  fs::create_directories(dir / "open");
  ASSERT_EQ(::chmod((dir / "open").c_str(), 0777), 0);
  EXPECT_TRUE(environment_for(dir / "open").empty()) << "a folder others can write";
  EXPECT_TRUE(environment_for(dir / "open" / "choices").empty()) << "a folder under one others can write";
  EXPECT_FALSE(fs::exists(dir / "open" / "choices")) << "made where others could change it";

  std::ofstream(dir / "a-file") << "mine";
  EXPECT_TRUE(environment_for(dir / "a-file").empty());
  EXPECT_EQ(test::read_all(dir / "a-file"), "mine");
  ASSERT_EQ(::mkfifo((dir / "a-pipe").c_str(), 0600), 0);
  const int code = test::exit_code_within(30, [&] { return environment_for(dir / "a-pipe").empty() ? 0 : 1; });
  EXPECT_EQ(code, 0) << (code < 0 ? "it waited on the pipe" : "a pipe was taken for the folder");
  EXPECT_TRUE(fs::is_fifo(dir / "a-pipe"));

  if (::geteuid() == 0) {
    // Another user's folder, and a link another user owns (it could point anywhere later).
    fs::create_directories(dir / "theirs");
    ASSERT_EQ(::chown((dir / "theirs").c_str(), 65534, 65534), 0);
    EXPECT_TRUE(environment_for(dir / "theirs").empty()) << "another user's folder";
    fs::create_directories(dir / "target");
    fs::create_symlink(dir / "target", dir / "their-link");
    ASSERT_EQ(::lchown((dir / "their-link").c_str(), 65534, 65534), 0);
    EXPECT_TRUE(environment_for(dir / "their-link" / "choices").empty()) << "through another user's link";
    EXPECT_FALSE(fs::exists(dir / "target" / "choices"));
  }
}

}  // namespace ortfleet
