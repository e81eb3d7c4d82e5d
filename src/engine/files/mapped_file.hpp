#pragma once
// A read-only memory mapping of a file (RAII). Sessions created from a mapping read the model from
// the page cache without copying it into a private buffer first.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ortfleet::detail {

/// What tells one version of a file from another without reading it. The kernel sets the change
/// time (ctime) on every write, chmod or rename, and no user can set it back (utimensat sets only the
/// access and modification times), so a file whose identity is unchanged has not been written to.
struct FileIdentity {
  uint64_t inode = 0;
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool regular = false;
  bool operator==(const FileIdentity&) const = default;
};

enum class Symlinks { follow, refuse };

/// The identity of `path`, or nullopt when it cannot be inspected (a missing file, among others).
std::optional<FileIdentity> identity_of(const std::string& path, Symlinks symlinks = Symlinks::follow);

class MappedFile {
 public:
  /// Maps `path`; with `populate`, pages are faulted in up front (MAP_POPULATE); with
  /// Symlinks::refuse a symlink is an error (O_NOFOLLOW). Throws ortfleet::Error.
  explicit MappedFile(const std::string& path, bool populate = false, Symlinks symlinks = Symlinks::follow);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  /// The path it was opened with.
  const std::string& path() const { return path_; }
  /// The file's identity when it was opened.
  const FileIdentity& identity() const { return identity_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
  FileIdentity identity_;
};

}  // namespace ortfleet::detail
