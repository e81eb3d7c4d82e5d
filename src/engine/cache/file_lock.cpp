#include "engine/cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/private_dir.hpp"

namespace ortfleet::detail {

namespace {
/// Whether `fd` is still the file at `path` (not removed or replaced since it was opened).
bool still_at(int fd, const std::string& path) {
  struct stat held {};
  struct stat named {};
  return ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}
}  // namespace

bool FileLock::try_lock(const std::string& path, Mode mode) {
  unlock();
  const int operation = (mode == Mode::shared ? LOCK_SH : LOCK_EX) | LOCK_NB;
  for (int attempt = 0; attempt < 8; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw FolderNotWritable("cannot open the lock file " + path + ": " + std::strerror(errno));
    if (::flock(fd.get(), operation) != 0) return false;
    if (!still_at(fd.get(), path)) continue;  // removed or replaced while we took it: take the new one
    path_ = path;
    fd_ = std::move(fd);
    return true;
  }
  return false;
}

bool FileLock::try_upgrade() {
  if (!fd_) return false;
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0 || !still_at(fd_.get(), path_)) {
    unlock();
    return false;
  }
  return true;
}

}  // namespace ortfleet::detail
