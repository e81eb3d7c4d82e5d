#pragma once
// The files a command is asked to write (--export-json, --html, --write-config, report -o, --trace,
// --timeline, --ort-log, cache export --out, synth's model): written whole or not at all, never over
// one of the files the command reads, and never in place of what stands at the path when that is not
// a file (a link, a pipe, a device). Every output of every command goes through OutputFile, so that
// each keeps the same promises (docs/guarantees.md).
#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ortfleet {

namespace detail {
/// Why writing `path` failed, from errno right after the failure: a missing folder, permissions, a
/// full disk or a folder in the way each need a different fix. Throws ortfleet::Error.
[[noreturn]] void throw_write_error(const std::string& path, int err);
}  // namespace detail

/// What a file is, in words, from its lstat: "a regular file of 12 bytes", "a folder", "a named pipe",
/// "a device", "a symbolic link", "a socket".
std::string describe_file(const struct stat& st);
/// The same for what stands at `path` ("nothing (...)" when nothing does).
std::string describe_file_at(const std::string& path);

/// Why an existing regular file at an output's path must be left as it is ("" when it may be replaced):
/// an output whose files ortfleet can recognise (a cache bundle) replaces only its own kind.
using ReplaceableCheck = std::function<std::string(const std::string& path)>;

/// One output file, written in pieces (gigabytes of a bundle or a model) or whole:
///  - a regular file (or none yet) is written into a hidden file beside it (.NAME.ortfleet-<pid>-<random>)
///    and renamed over it by commit(): a failure, a full disk or a kill leaves the old file as it was.
///    A replaced file keeps its mode (and, as root, its owner); a new one gets the mode the umask leaves
///    of 0666;
///  - a symbolic link is written through (what it names is written as above, the link stays);
///  - a named pipe or a device (/dev/null, /dev/stdout, `>(cmd)`) is written as it is, never replaced;
///    a pipe no process reads is an error at once, never a wait.
/// The path is checked when the OutputFile is made (check_output_path); nothing is created before the
/// first write. Not committed when it goes away: what was written is removed.
class OutputFile {
 public:
  /// `flag` names the path in errors ("--out"); `replaceable` decides about an existing regular file
  /// (null: any may be replaced, as a shell's redirection would). Throws ortfleet::Error.
  explicit OutputFile(std::string path, std::string flag = {}, ReplaceableCheck replaceable = nullptr);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  /// The descriptor to write to (the hidden file, or the pipe or device), opened at the first call.
  int fd();
  /// Writes all of `bytes`, or throws ortfleet::Error (a full disk, a pipe closed by its reader).
  void write(std::string_view bytes);
  /// The same as a stream, for writers that stream (a model's protobuf); buffered, and flushed by
  /// commit(), which also reports a write of it that failed.
  std::ostream& stream();
  /// Bytes written (through write() and stream(), and what the caller reports with add_written()
  /// after writing to fd() itself).
  uint64_t bytes_written() const { return written_; }
  void add_written(uint64_t bytes) { written_ += bytes; }
  /// Puts the file in place: flushed to disk when `durable`, then renamed over the path. Nothing to do
  /// for a pipe or a device. Throws ortfleet::Error; the old file is then as it was.
  void commit(bool durable = false);
  const std::string& path() const { return path_; }

 private:
  struct Target;
  class Buffer;
  void open_partial();
  std::string path_;
  std::string flag_;
  std::unique_ptr<Target> target_;
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<std::ostream> stream_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

/// The checks an output's path gets before any work: given and not empty, no folder in its place, its
/// folder there, and what `replaceable` says of a regular file already at it. Throws ortfleet::Error
/// naming `flag` and the path.
void check_output_path(const std::string& flag, const std::string& path, const ReplaceableCheck& replaceable = nullptr);

/// Writes `text` to `path` whole or not at all, as OutputFile does. Throws ortfleet::Error.
void write_output_file(const std::string& path, const std::string& text);

/// Refuses, before any work, a command line that would write a file over one it reads, or two of its
/// outputs over each other, and each output check_output_path refuses: `outputs` and `inputs` are
/// (what names it, path) pairs such as ("--export-json", "model.onnx") and ("the model", "model.onnx");
/// empty paths are skipped (an empty flag value is the command line's to refuse). Throws
/// ortfleet::Error naming both.
void refuse_overwriting(const std::vector<std::pair<std::string, std::string>>& outputs,
                        const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace ortfleet
