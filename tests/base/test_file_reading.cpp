// Every read of a path a user names opens it without waiting (base/file_reading.hpp): issue 58 found a
// named pipe as ORTFLEET_ORT_LIB holding every command (doctor, start, serve, Python) in open().
#include "base/file_reading.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/options.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

TEST(FileReading, AFileIsReadWholeAndAnythingElseIsRefusedAtOnce) {
  const fs::path dir = test::fresh_dir("file-reading");
  std::ofstream(dir / "notes.txt") << "two\nlines\n";
  EXPECT_EQ(detail::read_whole_file((dir / "notes.txt").string(), "the notes", "Fix"), "two\nlines\n");
  EXPECT_NE(test::error_of([&] { detail::read_whole_file((dir / "notes.txt").string(), "the notes", "Fix", 4); }).find("more than the 4 it may"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { detail::read_whole_file((dir / "none").string(), "the notes", "Fix"); })
                .find("cannot read the notes " + (dir / "none").string() + ": No such file or directory"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { detail::read_whole_file(dir.string(), "the notes", "Fix"); }).find(dir.string() + " is a folder, not a file"), std::string::npos);
  EXPECT_NE(test::error_of([&] { detail::open_file_to_read("/dev/null", "the notes", "Fix"); }).find("/dev/null is a device, not a file"), std::string::npos);
  EXPECT_NE(test::error_of([&] { detail::open_file_to_read(std::string("a\0b", 3), "the notes", "Fix"); }).find("the path holds a NUL byte"),
            std::string::npos);
  fs::create_symlink(dir / "notes.txt", dir / "link.txt");
  EXPECT_NO_THROW(detail::open_file_to_read((dir / "link.txt").string(), "", ""));
  EXPECT_NE(test::error_of([&] { detail::open_file_to_read((dir / "link.txt").string(), "the entry", "", /*follow_symlinks=*/false); })
                .find("is a symbolic link, not a file"),
            std::string::npos);
  // A named pipe, where a config, a shape list, a model or a library is read: an error at once, never a wait.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  const std::string pipe = (dir / "pipe").string();
  EXPECT_EQ(test::exit_code_within(30, [&] { return test::error_of([&] { RunConfig::load(pipe); }).find(pipe + " is a named pipe, not a file") != std::string::npos ? 0 : 1; }), 0);
  EXPECT_EQ(test::exit_code_within(30, [&] { return test::error_of([&] { detail::read_whole_file(pipe, "", ""); }).find("named pipe") != std::string::npos ? 0 : 1; }), 0);
  fs::remove_all(dir);
}

}  // namespace ortfleet
