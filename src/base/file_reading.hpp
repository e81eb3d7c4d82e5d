#pragma once
// Files a user names (a model, a config, a library, a list of shapes, a bundle), opened for reading
// without ever waiting: open() of a named pipe with no writer waits for one for ever, and a device
// may never answer. Every read of a path a user or the environment names goes through here.
#include <sys/stat.h>

#include <string>

#include "base/unique_fd.hpp"

namespace ortfleet::detail {

/// A file opened for reading, and its status when it was opened.
struct FileToRead {
  UniqueFd fd;
  struct stat status {};
};

/// Opens `path` for reading (O_CLOEXEC, O_NOCTTY; not through a symlink when `follow_symlinks` is
/// false): only a regular file, told apart before it is opened (stat) and again from the opened
/// descriptor (fstat, opened with O_NONBLOCK, so that a path swapped for a pipe meanwhile cannot
/// hold it). The descriptor reads blocking. Throws ortfleet::Error "WHAT PATH is a named pipe, not
/// a file" or "cannot read WHAT PATH: REASON" (`what`: "the config", "the custom-op library"), with
/// `hint`.
FileToRead open_file_to_read(const std::string& path, const std::string& what, const std::string& hint, bool follow_symlinks = true);

/// The whole of the file `path` (opened as open_file_to_read does), at most `most_bytes` of it:
/// a larger one throws ortfleet::Error, as does a failed read.
std::string read_whole_file(const std::string& path, const std::string& what, const std::string& hint, size_t most_bytes = size_t{1} << 30);

}  // namespace ortfleet::detail
