#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/private_dir.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

fs::path fresh(const std::string& name) {
  const fs::path p = test::scratch_dir() / "private" / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  ::chmod(p.parent_path().c_str(), 0700);
  return p;
}
}  // namespace

TEST(PrivateDir, ATemporaryFolderIsUnguessablePrivateAndRemoved) {
  const test::OpenUmask umask;
  fs::path first;
  {
    const PrivateDir a = PrivateDir::temporary("ortfleet-test");
    const PrivateDir b = PrivateDir::temporary("ortfleet-test");
    first = a.path();
    EXPECT_NE(a.path(), b.path());
    EXPECT_TRUE(a.removed_at_end());
    EXPECT_EQ(mode_of(a.path()), 0700u);
    EXPECT_NE(a.path().filename().string(), "ortfleet-test-" + std::to_string(::getpid()));
    std::ofstream(a.path() / "log.jsonl") << "x";
    fs::create_directories(a.path() / "nested");
  }
  EXPECT_FALSE(fs::exists(first));
}

TEST(PrivateDir, ANamedFolderIsMadePrivateWhateverTheUmaskAndKept) {
  const test::OpenUmask umask;
  const fs::path root = fresh("named");
  {
    const PrivateDir d = PrivateDir::named(root / "a" / "b", "hint");
    EXPECT_FALSE(d.removed_at_end());
  }
  EXPECT_TRUE(fs::is_directory(root / "a" / "b"));
  EXPECT_EQ(mode_of(root), 0700u);
  EXPECT_EQ(mode_of(root / "a"), 0700u);
  EXPECT_EQ(mode_of(root / "a" / "b"), 0700u);
}

TEST(PrivateDir, RefusesAFolderOthersCanWrite) {
  const fs::path open = fresh("open");
  fs::create_directories(open);
  ::chmod(open.c_str(), 0777);
  const std::string e = error_of([&] { ensure_private_dir(open, "Set ORTFLEET_CACHE to a folder only you can write"); });
  EXPECT_NE(e.find(open.string() + " can be written by other users (mode 0777)"), std::string::npos) << e;
  EXPECT_NE(e.find("ORTFLEET_CACHE"), std::string::npos) << e;
}

TEST(PrivateDir, RefusesAFolderUnderOneOthersCanReplace) {
  const fs::path shared = fresh("shared");
  fs::create_directories(shared / "mine");
  ::chmod((shared / "mine").c_str(), 0700);
  ::chmod(shared.c_str(), 0777);  // anyone may rename "mine" and put their own folder there
  const std::string e = error_of([&] { ensure_private_dir(shared / "mine", "hint"); });
  EXPECT_NE(e.find("the folder " + shared.string() + " above"), std::string::npos) << e;
  ::chmod(shared.c_str(), 01777);  // sticky, like /tmp: others may not rename what is ours
  EXPECT_NO_THROW(ensure_private_dir(shared / "mine", "hint"));
}

// A folder refused after it was made still stood where another user could replace it: nothing is made now.
TEST(PrivateDir, NothingIsMadeInAFolderOthersCanReplace) {
  const fs::path open = fresh("open-parent");
  fs::create_directories(open);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  const std::string e = error_of([&] { make_dir_safely(open / "layer" / "models", 0755, "hint"); });
  EXPECT_NE(e.find("the folder " + open.string() + " above " + (open / "layer" / "models").string() +
                   " can be written by other users (mode 0777, not sticky)"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(open / "layer"));
  ::chmod(open.c_str(), 0755);
  const test::OpenUmask umask;
  make_dir_safely(open / "layer" / "models", 0755, "hint");
  EXPECT_EQ(mode_of(open / "layer"), 0755u);
  EXPECT_EQ(mode_of(open / "layer" / "models"), 0755u);
}

TEST(PrivateDir, RefusesFoldersAndSymlinksOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "making files of another user needs root";
  const uid_t nobody = 65534;
  const fs::path theirs = fresh("theirs");
  fs::create_directories(theirs);
  ::chmod(theirs.c_str(), 0700);
  ASSERT_EQ(::chown(theirs.c_str(), nobody, nobody), 0);
  std::string e = error_of([&] { ensure_private_dir(theirs, "Set ORTFLEET_CACHE"); });
  EXPECT_NE(e.find("the folder " + theirs.string() + " belongs to"), std::string::npos) << e;
  EXPECT_NE(e.find("uid 65534"), std::string::npos) << e;

  const fs::path mine = fresh("mine");
  fs::create_directories(mine);
  const fs::path link = fresh("link");
  fs::create_directory_symlink(mine, link);
  ASSERT_EQ(::lchown(link.c_str(), nobody, nobody), 0);  // its owner can point it elsewhere later
  e = error_of([&] { ensure_private_dir(link, "hint"); });
  EXPECT_NE(e.find("passes through the symlink " + link.string()), std::string::npos) << e;
  // A folder to be made under it: refused before it is made (it was made through the link, then refused).
  e = error_of([&] { ensure_private_dir(link / "cache", "hint"); });
  EXPECT_NE(e.find("passes through the symlink " + link.string()), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(mine / "cache")) << "made through another user's link";
}

TEST(PrivateDir, AFolderThatCannotBeMadeIsNotWritableRatherThanUnsafe) {
  const fs::path root = fresh("blocked");
  fs::create_directories(root);
  std::ofstream(root / "file") << "not a folder";
  EXPECT_THROW(ensure_private_dir(root / "file" / "cache", "hint"), FolderNotWritable);
}

TEST(PrivateDir, WritesFilesWholeNeverThroughASymlinkAndNotWorldWritable) {
  const test::OpenUmask umask;
  const fs::path root = fresh("files");
  ensure_private_dir(root, "hint");
  std::ofstream(root / "victim") << "precious";
  fs::create_symlink(root / "victim", root / "out.json");
  fs::create_symlink(root / "victim", root / ("out.json.partial-" + std::to_string(::getpid())));
  write_private_file(root / "out.json", "{}", /*durable=*/true);
  std::ifstream victim(root / "victim");
  std::string text;
  victim >> text;
  EXPECT_EQ(text, "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root / "out.json")));
  EXPECT_EQ(mode_of(root / "out.json"), 0600u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / ("out.json.partial-" + std::to_string(::getpid())))));
  EXPECT_THROW(write_private_file(root / "missing" / "out.json", "{}", false), FolderNotWritable);
}

}  // namespace ortfleet::detail
