#include "base/file_reading.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"

namespace ortfleet::detail {

FileToRead open_file_to_read(const std::string& path, const std::string& what, const std::string& hint, bool follow_symlinks) {
  const std::string named = what.empty() ? path : what + " " + path;
  const auto cannot = [&](const std::string& why) { return Error("cannot read " + named + ": " + why, hint); };
  if (path.empty()) throw cannot("the path is empty");
  if (path.find('\0') != std::string::npos) throw cannot("the path holds a NUL byte");
  FileToRead file;
  // Told apart before it is opened: opening a device alone may have effects.
  if ((follow_symlinks ? ::stat(path.c_str(), &file.status) : ::lstat(path.c_str(), &file.status)) != 0) throw cannot(std::strerror(errno));
  const auto not_a_file = [&] { return Error(named + " is " + describe_file(file.status) + ", not a file", hint); };
  if (!S_ISREG(file.status.st_mode)) throw not_a_file();
  // O_NONBLOCK: a path swapped for a named pipe since opens at once, and fstat tells.
  file.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow_symlinks ? 0 : O_NOFOLLOW)));
  if (!file.fd) throw cannot(std::strerror(errno));
  if (::fstat(file.fd.get(), &file.status) != 0) throw cannot(std::strerror(errno));
  if (!S_ISREG(file.status.st_mode)) throw not_a_file();
  const int flags = ::fcntl(file.fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(file.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return file;
}

std::string read_whole_file(const std::string& path, const std::string& what, const std::string& hint, size_t most_bytes) {
  const FileToRead file = open_file_to_read(path, what, hint);
  const std::string named = what.empty() ? path : what + " " + path;
  if (static_cast<uint64_t>(file.status.st_size) > most_bytes) {
    throw Error("cannot read " + named + ": it holds " + std::to_string(file.status.st_size) + " bytes, more than the " + std::to_string(most_bytes) +
                    " it may",
                hint);
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(file.fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + named + ": " + std::strerror(errno), hint);
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > most_bytes) throw Error("cannot read " + named + ": it grew past " + std::to_string(most_bytes) + " bytes while read", hint);
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace ortfleet::detail
