// The files a command is asked to write (ortfleet/base/output_file.hpp): whole or not at all, and
// never over what the command reads.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
fs::path fresh(const std::string& name) { return test::fresh_dir(fs::path("output-file") / name); }

using test::error_of;
}  // namespace

TEST(OutputFile, ReplacesAFileWholeKeepingItsModeAndWritesThroughALink) {
  const fs::path dir = fresh("replace");
  const fs::path file = dir / "result.json";
  write_output_file(file.string(), "first");
  EXPECT_EQ(test::read_all(file), "first");
  ::chmod(file.c_str(), 0640);
  write_output_file(file.string(), "second");
  EXPECT_EQ(test::read_all(file), "second");
  EXPECT_EQ(fs::status(file).permissions(), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(file, dir / "link.json");
  write_output_file((dir / "link.json").string(), "third");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(test::read_all(file), "third");
  EXPECT_NO_THROW(write_output_file("/dev/null", "into nothing"));  // a device is written, never replaced
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names.size(), 2u) << "no partial file is left";
}

TEST(OutputFile, AFolderOrAMissingFolderIsOneClearError) {
  const fs::path dir = fresh("folders");
  EXPECT_NE(error_of([&] { write_output_file(dir.string(), "x"); }).find("cannot write " + dir.string() + ": it is a folder"), std::string::npos);
  EXPECT_NE(error_of([&] { write_output_file((dir / "no" / "out.json").string(), "x"); }).find(": no such folder"), std::string::npos);
}

// A write that fails midway (here the file size limit, as a full disk would) leaves the old file as
// it was: it used to be truncated first.
TEST(OutputFile, AWriteThatFailsLeavesTheOldFileAsItWas) {
  const fs::path file = fresh("full") / "report.html";
  write_output_file(file.string(), "the report of yesterday");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_output_file(file.string(), std::string(100000, 'x'));
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("the disk is full") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write succeeded; 2: another error";
  EXPECT_EQ(test::read_all(file), "the report of yesterday");
  EXPECT_EQ(std::distance(fs::directory_iterator(file.parent_path()), fs::directory_iterator()), 1) << "no partial file is left";
}

TEST(OutputFile, AnOutputThatIsAnInputOrAnotherOutputIsRefused) {
  const fs::path dir = fresh("inputs");
  const fs::path model = dir / "model.onnx";
  { std::ofstream(model) << "a model"; }
  fs::create_symlink(model, dir / "alias.onnx");
  const std::vector<std::pair<std::string, std::string>> inputs = {{"the model", model.string()}, {"the config (--config)", ""}};
  const std::string same = error_of([&] { refuse_overwriting({{"--export-json", (dir / "." / "model.onnx").string()}}, inputs); });
  EXPECT_NE(same.find("is the model, which this command reads; ortfleet does not write over it"), std::string::npos) << same;
  EXPECT_NE(error_of([&] { refuse_overwriting({{"--html", (dir / "alias.onnx").string()}}, inputs); }).find("--html"), std::string::npos);
  const std::string twice = error_of([&] { refuse_overwriting({{"--export-json", "out.json"}, {"--html", "./out.json"}}, inputs); });
  EXPECT_NE(twice.find("--html and --export-json both name ./out.json"), std::string::npos) << twice;
  EXPECT_EQ(error_of([&] { refuse_overwriting({{"--export-json", (dir / "bench.json").string()}, {"--html", ""}}, inputs); }), "(no error)");
}

}  // namespace ortfleet
