#pragma once
// An advisory lock on a file (flock), released when the object goes away or the process ends.
#include <string>

namespace ortfleet::detail {

class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  /// Takes the lock without waiting; false if another process holds it (or the file cannot be made).
  bool try_lock(const std::string& path);

 private:
  int fd_ = -1;
};

}  // namespace ortfleet::detail
