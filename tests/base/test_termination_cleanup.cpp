#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "base/termination_cleanup.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
/// A child that writes `files`, registers them (or not), says so on `ready`, and waits for a signal.
pid_t writer_child(const std::vector<std::string>& files, bool registered, int ready) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  install_termination_cleanup();
  for (const auto& f : files) ::close(::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600));
  if (registered) {
    static RemoveOnTermination unfinished(files);  // static: the child never returns from here
  }
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(ready, &byte, 1);
  for (;;) ::pause();
}

int terminate_after_ready(pid_t child, int ready) {
  char byte = 0;
  EXPECT_EQ(::read(ready, &byte, 1), 1);
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}
}  // namespace

// A background fill's worker told to stop (its job ended first) removes the entry it was writing, and
// still dies of the signal, so that its parent sees how it ended.
TEST(TerminationCleanup, TheFilesOfAStoppedWriterAreRemovedAndTheSignalStillEndsIt) {
  const fs::path dir = test::scratch_dir() / "termination-cleanup";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> files = {(dir / "entry.partial-1").string(), (dir / "entry.onnx.data").string()};
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int status = terminate_after_ready(writer_child(files, /*registered=*/true, pipe_fds[1]), pipe_fds[0]);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  for (const auto& f : files) EXPECT_FALSE(fs::exists(f)) << f << " outlived its writer";
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// A worker stopped while it primed its libraries left its folder of throwaway models in TMPDIR (a
// bench's Ctrl-C left two): a registered folder goes with the files in it, a writer's hidden partial too.
TEST(TerminationCleanup, ARegisteredFolderIsRemovedWithTheFilesInIt) {
  const fs::path dir = test::scratch_dir() / "termination-folder";
  fs::remove_all(dir);
  const fs::path folder = dir / "ortfleet-primer-x";
  fs::create_directories(folder);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    install_termination_cleanup();
    static RemoveOnTermination priming({folder.string()});
    for (int i = 0; i < 300; ++i) {  // more than one getdents64 buffer of names
      const std::string name = (folder / (".convolutions.onnx.partial-" + std::to_string(i))).string();
      ::close(::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600));
    }
    const char byte = 1;
    [[maybe_unused]] const auto written = ::write(pipe_fds[1], &byte, 1);
    for (;;) ::pause();
  }
  const int status = terminate_after_ready(child, pipe_fds[0]);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(fs::exists(folder)) << "the folder outlived its writer";
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// Files nobody registered (or whose scope ended: a published entry) stay.
TEST(TerminationCleanup, FilesNotRegisteredStay) {
  const fs::path dir = test::scratch_dir() / "termination-kept";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> files = {(dir / "entry.onnx").string()};
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int status = terminate_after_ready(writer_child(files, /*registered=*/false, pipe_fds[1]), pipe_fds[0]);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_TRUE(fs::exists(files.front()));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

}  // namespace ortfleet
