#include "ortfleet/base/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <ostream>
#include <random>
#include <streambuf>
#include <vector>

#include "base/termination_cleanup.hpp"
#include "base/unique_fd.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

void detail::throw_write_error(const std::string& path, int err) {
  const std::string folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  switch (err) {
    case ENOENT:
    case ENOTDIR: {
      std::error_code ec;
      if (err == ENOENT && fs::is_directory(folder, ec)) {
        // The folder is there, and still no file can be made in it: /proc, /sys, a file system of the kernel's.
        throw Error("cannot write " + path + ": no new file can be made in " + folder + " (the kernel's own file system, such as /proc or /sys?)",
                    "Write into a folder on a disk");
      }
      throw Error("cannot write " + path + ": no such folder (" + folder + ")", "Create the folder first, or fix the path");
    }
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
    case ELOOP:
      throw Error("cannot write " + path + ": it is a symbolic link loop", "Fix the link, or give another path");
    case ENXIO:
      throw Error("cannot write " + path + ": it is a named pipe no process reads", "Start its reader first, or give the path of a file");
    default:
      throw Error("cannot write " + path + ": " + (err != 0 ? std::strerror(err) : "unknown error"), "Check the path and the free disk space");
  }
}

using detail::throw_write_error;
using detail::UniqueFd;

std::string describe_file(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "a regular file of " + std::to_string(st.st_size) + " bytes";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a named pipe";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a special file";
}

namespace {

/// Writes all of `data` to `fd`; errno tells why not.
bool write_all(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Where an output's bytes go: through a symbolic link to what it names, as a shell's redirection writes.
struct Resolved {
  fs::path target;
  std::optional<struct stat> status;  ///< of the target; none when nothing is there yet
};

Resolved resolve(const std::string& path) {
  Resolved r{path, std::nullopt};
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    r.target = fs::weakly_canonical(path, ec);
    if (ec) throw_write_error(path, ec.value());
  }
  if (::stat(r.target.c_str(), &st) == 0) {
    r.status = st;
  } else if (errno == ELOOP) {
    throw_write_error(path, ELOOP);
  }
  return r;
}

std::string named(const std::string& flag, const std::string& path) { return flag.empty() ? path : flag + " " + path; }

/// Refuses a write whose path goes through a symbolic link another user owns (not this process's user,
/// nor root), at the path itself or at a folder on the way to it, in `path` and in what each link of the
/// caller's names: its owner decides where the write lands, as the kernel's protected_symlinks rule has
/// it for sticky folders, which a folder of theirs is not. Root asked to write into another user's folder
/// otherwise overwrote the file of root's that a link there named (issue 58's audit).
void refuse_links_of_others(const std::string& flag, const std::string& path, const fs::path& walked, int depth = 0) {
  if (depth > 40) throw_write_error(path, ELOOP);
  std::error_code ec;
  const fs::path whole = walked.is_absolute() ? walked : fs::absolute(walked, ec);
  fs::path prefix;
  for (const auto& part : whole) {
    prefix /= part;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) continue;
    const fs::path target = fs::read_symlink(prefix, ec);
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
      throw Error(named(flag, path) + ": " + prefix.string() + " is a symbolic link of another user's (uid " + std::to_string(st.st_uid) + ") to " +
                      target.string() + ", who decides where a write through it lands; ortfleet writes through no such link",
                  "Give a path of your own, through links of yours or root's only");
    }
    if (!ec) refuse_links_of_others(flag, path, target.is_absolute() ? target : prefix.parent_path() / target, depth + 1);
  }
}

}  // namespace

std::string describe_file_at(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::string("nothing (") + std::strerror(errno) + ")";
  return describe_file(st);
}

void check_output_path(const std::string& flag, const std::string& path, const ReplaceableCheck& replaceable) {
  if (path.empty()) throw Error((flag.empty() ? std::string("the output path") : flag) + " is empty", "Give the path of a file to write");
  refuse_links_of_others(flag, path, path);
  const Resolved r = resolve(path);
  if (r.status) {
    const struct stat& st = *r.status;
    if (S_ISDIR(st.st_mode)) throw_write_error(path, EISDIR);
    if (S_ISSOCK(st.st_mode)) throw Error(named(flag, path) + " is a socket; ortfleet writes no file into it", "Give the path of a file");
    if (S_ISREG(st.st_mode) && replaceable) {
      if (const std::string why = replaceable(r.target.string()); !why.empty()) {
        throw Error(named(flag, path) + " exists and " + why + " (it is " + describe_file(st) + "); ortfleet leaves it as it is",
                    "Give a path that is free, or remove the file first");
      }
    }
    if (!S_ISREG(st.st_mode)) return;  // a pipe or a device: written as it is
  }
  const fs::path folder = r.target.has_parent_path() ? r.target.parent_path() : fs::path(".");
  struct stat folder_status {};
  if (::stat(folder.c_str(), &folder_status) != 0) throw_write_error(path, errno);
  if (!S_ISDIR(folder_status.st_mode)) throw_write_error(path, ENOTDIR);
  if (::access(folder.c_str(), W_OK) != 0) throw_write_error(path, errno);
}

struct OutputFile::Target {
  Resolved resolved;
  bool special = false;  ///< a pipe or a device: written in place
  UniqueFd fd;
  fs::path partial;      ///< the hidden file beside the target, once made
  std::unique_ptr<RemoveOnTermination> unfinished;
};

/// A stream's bytes, 1 MB at a time, through OutputFile::write; the first failure is kept for commit().
class OutputFile::Buffer : public std::streambuf {
 public:
  explicit Buffer(OutputFile& file) : file_(file), buffer_(size_t{1} << 20) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  /// Writes what is buffered; rethrows the first failure of any write.
  void flush_or_throw() {
    sync();
    if (failure_) std::rethrow_exception(failure_);
  }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    if (failure_) return -1;
    try {
      file_.write(std::string_view(pbase(), static_cast<size_t>(pptr() - pbase())));
    } catch (...) {
      failure_ = std::current_exception();
      return -1;
    }
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return 0;
  }

 private:
  OutputFile& file_;
  std::vector<char> buffer_;
  std::exception_ptr failure_;
};

OutputFile::OutputFile(std::string path, std::string flag, ReplaceableCheck replaceable)
    : path_(std::move(path)), flag_(std::move(flag)), target_(std::make_unique<Target>()) {
  check_output_path(flag_, path_, replaceable);
  target_->resolved = resolve(path_);
  target_->special = target_->resolved.status && !S_ISREG(target_->resolved.status->st_mode);
}

OutputFile::~OutputFile() {
  if (!committed_ && !target_->partial.empty()) {
    target_->fd = UniqueFd();
    ::unlink(target_->partial.c_str());
  }
}

void OutputFile::open_partial() {
  const fs::path& target = target_->resolved.target;
  const auto& existing = target_->resolved.status;
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device random;
  target_->partial = folder / ("." + target.filename().string() + ".ortfleet-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  target_->unfinished = std::make_unique<RemoveOnTermination>(std::vector<std::string>{target_->partial.string()});
  // A new file gets the mode the umask leaves of 0666, as any program's; one replaced keeps its own.
  target_->fd = UniqueFd(::open(target_->partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, existing ? 0600 : 0666));
  if (!target_->fd) {
    const int err = errno;
    target_->partial.clear();
    throw_write_error(path_, err);
  }
  if (existing) {
    // As root, a user's file stays the user's (best effort: a file system may refuse owners).
    if (::geteuid() == 0 && ::fchown(target_->fd.get(), existing->st_uid, existing->st_gid) != 0) errno = 0;
    if (::fchmod(target_->fd.get(), existing->st_mode & 07777) != 0) throw_write_error(path_, errno);
  }
}

int OutputFile::fd() {
  if (target_->fd) return target_->fd.get();
  if (!target_->special) {
    open_partial();
    return target_->fd.get();
  }
  // A pipe without a reader would block open() until one comes: O_NONBLOCK makes it an error (ENXIO).
  target_->fd = UniqueFd(::open(target_->resolved.target.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!target_->fd) throw_write_error(path_, errno);
  const int flags = ::fcntl(target_->fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(target_->fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw_write_error(path_, errno);
  return target_->fd.get();
}

void OutputFile::write(std::string_view bytes) {
  const int out = fd();
  if (!write_all(out, bytes.data(), bytes.size())) throw_write_error(path_, errno);
  written_ += bytes.size();
}

std::ostream& OutputFile::stream() {
  if (!stream_) {
    buffer_ = std::make_unique<Buffer>(*this);
    stream_ = std::make_unique<std::ostream>(buffer_.get());
  }
  return *stream_;
}

void OutputFile::commit(bool durable) {
  if (committed_) return;
  if (buffer_) buffer_->flush_or_throw();
  fd();  // an empty output is still written
  if (target_->special) {
    target_->fd = UniqueFd();
    committed_ = true;
    return;
  }
  const auto fail = [&](int err) {
    target_->fd = UniqueFd();
    ::unlink(target_->partial.c_str());
    target_->partial.clear();
    throw_write_error(path_, err);
  };
  if (durable && ::fsync(target_->fd.get()) != 0) fail(errno);
  if (::close(target_->fd.release()) != 0) fail(errno);
  // Only a file, or nothing, is ever replaced: something else put there meanwhile stays.
  struct stat now {};
  const fs::path& target = target_->resolved.target;
  if (::lstat(target.c_str(), &now) == 0 && !S_ISREG(now.st_mode)) {
    ::unlink(target_->partial.c_str());
    target_->partial.clear();
    throw Error("cannot write " + path_ + ": it became " + describe_file(now) + " while ortfleet worked; it is left as it is", "Give another path");
  }
  if (::rename(target_->partial.c_str(), target.c_str()) != 0) fail(errno);
  target_->unfinished->release();
  target_->partial.clear();
  committed_ = true;
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
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
    check_output_path(flag, path);
  }
}

}  // namespace ortfleet
