// The files a command is asked to write (ortfleet/base/output_file.hpp): whole or not at all, and
// never over what the command reads.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/sysmacros.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
fs::path fresh(const std::string& name) { return test::fresh_dir(fs::path("output-file") / name); }

using test::error_of;

struct stat status_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}
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

// A named pipe is written as it is, never replaced; one no process reads is an error at once (open()
// on it used to wait for a reader forever).
TEST(OutputFile, APipeIsWrittenWhenReadAndAnErrorNotAWaitWhenNot) {
  const fs::path fifo = fresh("fifo") / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int code = test::exit_code_within(30, [&] {
    const std::string e = error_of([&] { write_output_file(fifo.string(), "nobody reads this"); });
    return e.find("cannot write " + fifo.string() + ": it is a named pipe no process reads") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << (code < 0 ? "it waited for a reader" : "another error");
  EXPECT_TRUE(S_ISFIFO(status_of(fifo).st_mode));
  auto read = std::async(std::launch::async, [&] { return test::read_all(fifo); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the reader opens it first
  EXPECT_NO_THROW(write_output_file(fifo.string(), "read by somebody"));
  EXPECT_EQ(read.get(), "read by somebody");
  EXPECT_TRUE(S_ISFIFO(status_of(fifo).st_mode)) << "the pipe was replaced";
}

TEST(OutputFile, ADeviceIsWrittenNeverReplaced) {
  EXPECT_NO_THROW(write_output_file("/dev/null", "into nothing"));
  EXPECT_TRUE(S_ISCHR(status_of("/dev/null").st_mode));
  EXPECT_NE(error_of([] { write_output_file("/dev/full", "x"); }).find("cannot write /dev/full: the disk is full"), std::string::npos);
  if (::geteuid() != 0) GTEST_SKIP() << "making a device node needs root";
  // A null device of our own: as root, replacing a device node is possible, and must not happen.
  const fs::path device = fresh("device") / "null";
  ASSERT_EQ(::mknod(device.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);
  OutputFile out(device.string(), "--out");
  out.stream() << std::string(3 << 20, 'x');
  out.commit();
  const struct stat st = status_of(device);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, ::makedev(1, 3));
  EXPECT_EQ(out.bytes_written(), 3u << 20);
  EXPECT_EQ(std::distance(fs::directory_iterator(device.parent_path()), fs::directory_iterator()), 1) << "a file was left beside it";
}

// A user's 0600 file came back 0644 (and, written by root, root's).
TEST(OutputFile, AReplacedFileKeepsItsModeAndOwner) {
  const fs::path file = fresh("owner") / "results.json";
  { std::ofstream(file) << "mine"; }
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  }
  write_output_file(file.string(), "new results");
  const struct stat st = status_of(file);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (root) {
    EXPECT_EQ(st.st_uid, 65534u) << "root's write took the file from its owner";
  }
  EXPECT_EQ(test::read_all(file), "new results");
}

// A link another user owns decides where a write through it lands: root asked to write into a folder
// of theirs (--timeline /home/them/out.json) overwrote a file of root's the link named, or made one in a
// folder of root's through a linked folder (issue 58's audit). Such a link, at the path or on the way
// to it, is refused; one of the caller's own (or root's) is written through, as before.
TEST(OutputFile, ALinkOfAnotherUserOnTheWayIsRefusedAndNothingIsWritten) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a link to another user";
  const fs::path dir = fresh("others-link");
  const fs::path mine = dir / "mine";
  fs::create_directories(mine);
  const fs::path victim = mine / "victim.conf";
  { std::ofstream(victim) << "keep me"; }
  const fs::path theirs = dir / "theirs";
  fs::create_directories(theirs);
  fs::create_symlink(victim, theirs / "out.json");
  fs::create_symlink(mine, theirs / "folder");
  ASSERT_EQ(::lchown((theirs / "out.json").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::lchown((theirs / "folder").c_str(), 65534, 65534), 0);
  const std::string through_file = error_of([&] { write_output_file((theirs / "out.json").string(), "results"); });
  EXPECT_NE(through_file.find("is a symbolic link of another user's (uid 65534)"), std::string::npos) << through_file;
  const std::string through_folder = error_of([&] { write_output_file((theirs / "folder" / "new.json").string(), "results"); });
  EXPECT_NE(through_folder.find((theirs / "folder").string() + " is a symbolic link of another user's (uid 65534)"), std::string::npos)
      << through_folder;
  EXPECT_EQ(test::read_all(victim), "keep me");
  EXPECT_FALSE(fs::exists(mine / "new.json"));
  // The caller's own link: written through.
  fs::create_symlink(victim, dir / "my-link.json");
  write_output_file((dir / "my-link.json").string(), "results");
  EXPECT_EQ(test::read_all(victim), "results");
}

TEST(OutputFile, WhatIsNotCommittedLeavesNothingAndAnEmptyPathIsOneClearError) {
  const fs::path dir = fresh("uncommitted");
  {
    OutputFile out((dir / "big.bin").string());
    out.stream() << std::string(3 << 20, 'x');  // past the buffer: a partial file exists
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0) << "an uncommitted output was left";
  EXPECT_NE(error_of([] { OutputFile out("", "--out"); }).find("--out is empty"), std::string::npos);
  EXPECT_NE(error_of([] { write_output_file("", "x"); }).find("the output path is empty"), std::string::npos);
}

// An output whose files ortfleet recognises replaces only its own kind, and says what it found.
TEST(OutputFile, ACheckOfWhatMayBeReplacedIsMadeBeforeAnyWrite) {
  const fs::path file = fresh("replaceable") / "notes.txt";
  { std::ofstream(file) << "my notes"; }
  const ReplaceableCheck only_bundles = [](const std::string&) { return std::string("is not a cache bundle"); };
  const std::string e = error_of([&] { OutputFile out(file.string(), "--out", only_bundles); });
  EXPECT_NE(e.find("--out " + file.string() + " exists and is not a cache bundle (it is a regular file of 8 bytes); ortfleet leaves it as it is"),
            std::string::npos)
      << e;
  EXPECT_EQ(test::read_all(file), "my notes");
  EXPECT_NO_THROW(OutputFile((file.parent_path() / "new.bin").string(), "--out", only_bundles)) << "nothing there: nothing to check";
}

}  // namespace ortfleet
