#include "ortfleet/base/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/unique_fd.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

void detail::throw_write_error(const std::string& path, int err) {
  const std::string folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      throw Error("cannot write " + path + ": no such folder (" + folder + ")", "Create the folder first, or fix the path");
    case EACCES:
    case EPERM:
      throw Error("cannot write " + path + ": permission denied", "Write somewhere you have write access, or fix the permissions of " + folder);
    case EROFS:
      throw Error("cannot write " + path + ": the file system is read-only", "Write somewhere else");
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      throw Error("cannot write " + path + ": the disk is full" + (err == EDQUOT ? " (your quota)" : err == EFBIG ? " (the file size limit)" : ""),
                  "Free space there, or write somewhere else");
    case EISDIR:
      throw Error("cannot write " + path + ": it is a folder", "Give the path of a file in it, e.g. " + (fs::path(path) / "out").string());
    default:
      throw Error("cannot write " + path + ": " + (err != 0 ? std::strerror(err) : "unknown error"), "Check the path and the free disk space");
  }
}

namespace {
/// Writes all of `text` to `fd`; errno tells why not.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

using detail::throw_write_error;
using detail::UniqueFd;

void write_output_file(const std::string& path, const std::string& text) {
  if (path.empty()) throw Error("no output path given", "Give the path of a file to write");
  std::error_code ec;
  // Through a symbolic link to what it names, as a shell's redirection writes.
  const fs::path target = fs::is_symlink(fs::symlink_status(path, ec)) ? fs::weakly_canonical(path, ec) : fs::path(path);
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw_write_error(path, EISDIR);
  if (exists && !S_ISREG(st.st_mode)) {  // a device or a pipe: written as it is, never replaced
    const UniqueFd fd(::open(target.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || !write_all(fd.get(), text)) throw_write_error(path, errno);
    return;
  }
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device random;
  const fs::path partial = folder / ("." + target.filename().string() + ".ortfleet-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  {
    // A new file gets the mode the umask leaves of 0666, as any program's; one replaced keeps its own.
    const UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, exists ? 0600 : 0666));
    if (!fd) throw_write_error(path, errno);
    if (!write_all(fd.get(), text) || (exists && ::fchmod(fd.get(), st.st_mode & 07777) != 0)) {
      const int err = errno;
      ::unlink(partial.c_str());
      throw_write_error(path, err);
    }
  }
  if (::rename(partial.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(partial.c_str());
    throw_write_error(path, err);
  }
}

void refuse_overwriting(const std::vector<std::pair<std::string, std::string>>& outputs,
                        const std::vector<std::pair<std::string, std::string>>& inputs) {
  // The same file whatever the spelling (./x, a link to it), by identity where it exists.
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::equivalent(a, b, ec) && !ec) return true;
    return fs::weakly_canonical(fs::absolute(a), ec) == fs::weakly_canonical(fs::absolute(b), ec);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [what, input] : inputs) {
      if (input.empty() || !same(path, input)) continue;
      throw Error(flag + " " + path + " is " + what + ", which this command reads; ortfleet does not write over it",
                  "Give " + flag + " another path");
    }
    for (size_t j = 0; j < i; ++j) {
      if (outputs[j].second.empty() || !same(path, outputs[j].second)) continue;
      throw Error(flag + " and " + outputs[j].first + " both name " + path + "; each would replace the other", "Give each its own path");
    }
  }
}

}  // namespace ortfleet
