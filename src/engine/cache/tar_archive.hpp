#pragma once
// The tar format (POSIX ustar), as far as cache bundles need it: regular files written one after
// another, read back one after another. A bundle is then a file `tar tvf` lists and `tar xf` unpacks.
// Sizes past ustar's 8 GB are written in GNU tar's base-256 form, which GNU tar and bsdtar read.
//
// The reader trusts nothing: every header's checksum is checked, a number that is not one, a name
// without its end, or a file that ends inside a header or a member is an error that says so. What a
// member is (its type, its name) is the caller's to judge: links, folders and long-name extensions are
// reported, never acted on.
#include <cstdint>
#include <optional>
#include <string>

namespace ortfleet::detail {

inline constexpr size_t kTarBlock = 512;

class TarWriter {
 public:
  /// Writes to `fd` (which it does not own); `path` names it in errors.
  TarWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  /// One member, mode 0644, owned by root: a regular file (`type` '0') of `size` bytes, or another
  /// type ('1' a hard link, '2' a symlink to `link`, '5' a folder: no bytes). Throws ortfleet::Error
  /// when the name does not fit ustar's 255 bytes (split at a '/' into its prefix and name fields),
  /// FolderNotWritable when the write fails.
  void add(const std::string& name, const void* data, uint64_t size, int64_t mtime_s, char type = '0', const std::string& link = {});
  /// The end of the archive (two zero blocks).
  void finish();
  uint64_t bytes_written() const { return written_; }

 private:
  void write_all(const void* data, size_t size);
  int fd_;
  std::string path_;
  uint64_t written_ = 0;
};

struct TarMember {
  std::string name;  ///< prefix and name joined as tar does ("models/x.onnx")
  uint64_t size = 0;
  char type = '0';   ///< '0' (or '\0') a regular file; '1' a hard link, '2' a symlink, '5' a folder, ...
  std::string link;  ///< a link's target, as written
  int index = 0;     ///< 1 for the first member
};

class TarReader {
 public:
  /// Reads from `fd` (which it does not own); `path` names it in errors.
  TarReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  /// The next member's header, having skipped what was left of the previous member; nullopt at the end of
  /// the archive. Throws ortfleet::Error when a header is damaged (checksum, numbers, name) or the file
  /// ends before the archive does, or when anything but zeros follows its end.
  std::optional<TarMember> next();
  /// Copies the current member's bytes (what next() returned) to `out`. Throws ortfleet::Error when
  /// the file ends early, or FolderNotWritable when writing fails (`out_path` names it).
  void copy_to(int out, const std::string& out_path);
  /// The current member's bytes, for small members (at most `limit`; more is an error).
  std::string read_small(uint64_t limit);

 private:
  /// Reads exactly `size` bytes; false at the end of the file before any byte when `end_allowed`,
  /// else (and when it ends inside them) throws, saying it is truncated inside `what`.
  bool read_exact(void* into, size_t size, const char* what, bool end_allowed = false);
  void skip_rest();
  /// After the end of the archive: at most a record's worth of zeros, else an error.
  void check_end_padding();
  int fd_;
  std::string path_;
  uint64_t left_ = 0;     ///< bytes of the current member not read yet
  uint64_t padding_ = 0;  ///< and the zeros that fill its last block
  int members_ = 0;
  bool ended_ = false;
};

}  // namespace ortfleet::detail
