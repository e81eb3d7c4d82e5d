#pragma once
// An advisory lock on a file (flock), released when the object goes away or the process ends.
// Readers of a cache entry hold it shared, its one writer exclusive.
#include <string>

#include "base/unique_fd.hpp"

namespace ortfleet::detail {

class FileLock {
 public:
  enum class Mode { shared, exclusive };

  FileLock() = default;
  /// Takes the lock without waiting; false if another process holds it in a conflicting mode.
  /// Throws FolderNotWritable when the lock file cannot be opened or made. The lock file is made with O_NOFOLLOW and mode 0600. A lock file removed
  /// or replaced while we waited for it (`ortfleet cache clear`) is opened again, so two processes
  /// never hold "the" lock on two different files.
  bool try_lock(const std::string& path, Mode mode);
  /// Shared -> exclusive without waiting; on false no lock is held any more (flock converts by
  /// dropping the old lock first).
  bool try_upgrade();
  bool held() const { return static_cast<bool>(fd_); }
  void unlock() { fd_ = UniqueFd(); }

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace ortfleet::detail
