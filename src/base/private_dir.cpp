#include "base/private_dir.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "base/unique_fd.hpp"
#include "ortfleet/base/output_file.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
std::string user_name(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr) {
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  }
  return "uid " + std::to_string(uid);
}

bool writable_by_others(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

struct stat status_of(const fs::path& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    throw FolderNotWritable("cannot inspect " + path.string() + ": " + std::strerror(errno));
  }
  return st;
}

/// `path` absolute and without "." or ".." parts, so that walking its parts walks its folders.
fs::path normal_absolute(const fs::path& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.has_parent_path() && p.filename().empty()) p = p.parent_path();  // "/a/b/" -> "/a/b"
  return p;
}

/// Who may own the folders ortfleet reads from and writes into, besides root.
struct Trust {
  uid_t me = ::geteuid();
  std::optional<uid_t> also;  ///< the owner of a shared layer or a library the user named
  std::string also_is = "the layer's owner";
  bool folder_must_be_mine = true;
  bool trusted(uid_t owner) const { return owner == me || owner == 0 || (also && owner == *also); }
  std::string owners() const {
    return also && *also != me && *also != 0 ? "you, root or " + user_name(*also) + " (" + also_is + ")" : "you or root";
  }
};

/// `first` (a resolved folder) and every folder above it up to /, which hold `named`: each must be a
/// trusted owner's and writable by others only when sticky (/tmp: others may add entries there, not rename ours).
void check_folders_from(const fs::path& first, const fs::path& named, const Trust& trust, const std::string& hint) {
  for (fs::path up = first;; up = up.parent_path()) {
    const struct stat st = status_of(up, /*follow=*/false);
    if (!trust.trusted(st.st_uid)) {
      throw Error("the folder " + up.string() + " above " + named.string() + " belongs to " + user_name(st.st_uid) +
                      ", who can replace what is in it (only " + trust.owners() + " may own it)",
                  hint);
    }
    if (writable_by_others(st.st_mode) && (st.st_mode & S_ISVTX) == 0) {
      throw Error("the folder " + up.string() + " above " + named.string() + " can be written by other users (mode " + octal_mode(st.st_mode) +
                      ", not sticky), who can replace what is in it",
                  hint);
    }
    if (up == up.root_path()) break;
  }
}

/// Every symlink on the way to `path` (`named` in errors) belongs to a trusted owner: a symlink on the
/// way is as good as a folder its owner can rename, it can point anywhere later.
void check_links_on_the_way(const fs::path& path, const fs::path& named, const std::string& hint, const Trust& trust) {
  fs::path prefix;
  for (const auto& part : path) {
    prefix /= part;
    const struct stat st = status_of(prefix, /*follow=*/false);
    if (S_ISLNK(st.st_mode) && !trust.trusted(st.st_uid)) {
      throw Error(named.string() + " passes through the symlink " + prefix.string() + ", which " + user_name(st.st_uid) +
                      " owns and can point elsewhere at any time",
                  hint);
    }
  }
}

/// Whether another user can make `folder` hold something else than what this user put there.
void check_chain(const fs::path& folder, const std::string& hint, const Trust& trust = {}) {
  check_links_on_the_way(folder, folder, hint, trust);
  std::error_code ec;
  const fs::path real = fs::canonical(folder, ec);
  if (ec) throw FolderNotWritable("cannot resolve " + folder.string() + ": " + ec.message(), hint);
  const struct stat self = status_of(real, /*follow=*/false);
  if (!S_ISDIR(self.st_mode)) throw Error(folder.string() + " is not a folder", hint);
  if (trust.folder_must_be_mine ? self.st_uid != trust.me : !trust.trusted(self.st_uid)) {
    throw Error("the folder " + folder.string() + " belongs to " + user_name(self.st_uid) + ", not to " +
                    (trust.folder_must_be_mine ? "you (" + user_name(trust.me) + ")" : trust.owners()) +
                    ": whoever owns it decides what ortfleet reads from it" + (trust.folder_must_be_mine ? " and overwrites in it" : ""),
                hint);
  }
  if (writable_by_others(self.st_mode)) {
    throw Error("the folder " + folder.string() + " can be written by other users (mode " + octal_mode(self.st_mode) + ")",
                hint + " (or chmod go-w " + folder.string() + ")");
  }
  check_folders_from(real.parent_path(), folder, trust, hint);
}

/// The nearest folder of `path` (itself or one above it) that exists.
fs::path nearest_existing(const fs::path& path) {
  fs::path at = path;
  struct stat st {};
  while (::lstat(at.c_str(), &st) != 0 && at != at.root_path()) at = at.parent_path();
  return at;
}
}  // namespace

void make_dir_safely(const fs::path& path, mode_t mode, const std::string& hint) {
  const fs::path folder = normal_absolute(path);
  // Nothing is made where another user could change it: the folders it would be made in are checked first.
  std::error_code ec;
  if (const fs::path existing = nearest_existing(folder); existing != folder) {
    check_links_on_the_way(existing, folder, hint, Trust{});  // nothing is made through another user's link
    const fs::path real = fs::canonical(existing, ec);
    if (ec) throw FolderNotWritable("cannot resolve " + existing.string() + ": " + ec.message(), hint);
    check_folders_from(real, folder, Trust{}, hint);
  }
  fs::path prefix;
  for (const auto& part : folder) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), mode) == 0) {
      // mkdir's mode went through the umask; set it exactly, on the folder just made (never a symlink).
      const UniqueFd made(::open(prefix.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!made || ::fchmod(made.get(), mode) != 0) throw FolderNotWritable("cannot set the mode of " + prefix.string() + ": " + std::strerror(errno), hint);
      continue;
    }
    if (errno != EEXIST) {
      throw FolderNotWritable("cannot make the folder " + prefix.string() + ": " + std::strerror(errno), hint);
    }
  }
  check_chain(folder, hint);
}

void ensure_private_dir(const fs::path& path, const std::string& hint) { make_dir_safely(path, 0700, hint); }

bool check_private_dir(const fs::path& path, const std::string& hint) {
  const fs::path folder = normal_absolute(path);
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0 && errno == ENOENT) return false;
  check_chain(folder, hint);
  return true;
}

uid_t check_shared_dir(const fs::path& path, const fs::path& layer, const std::string& hint) {
  std::error_code ec;
  const fs::path real_layer = fs::canonical(layer, ec);
  if (ec) throw FolderNotWritable("cannot resolve " + layer.string() + ": " + ec.message(), hint);
  Trust trust;
  trust.also = status_of(real_layer, /*follow=*/false).st_uid;
  trust.folder_must_be_mine = false;
  check_chain(normal_absolute(path), hint, trust);
  return *trust.also;
}

void check_shared_file(const fs::path& file, uid_t layer_owner, const std::string& hint) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return;  // missing: the entry's own check says so
  // A link's own mode bits (0777) say nothing of who may change what it names: it is refused for what it is.
  if (!S_ISREG(st.st_mode)) {
    throw Error(file.string() + " is " + describe_file(st) + ", not a file: a shared layer's entry is made of files, which its readers never follow",
                hint + " (import the entry again: ortfleet cache import --shared)");
  }
  Trust trust;
  trust.also = layer_owner;
  if (!trust.trusted(st.st_uid)) {
    throw Error(file.string() + " belongs to " + user_name(st.st_uid) + ", not to " + trust.owners() + ": its owner decides what your sessions run", hint);
  }
  if (writable_by_others(st.st_mode)) {
    throw Error(file.string() + " can be written by other users (mode " + octal_mode(st.st_mode) + "), who decide what your sessions run",
                hint + " (or chmod go-w " + file.string() + ")");
  }
}

void check_library_owners(const fs::path& library, const std::string& what, const std::string& hint) {
  const fs::path named = normal_absolute(library);
  std::error_code ec;
  const fs::path real = fs::canonical(named, ec);
  if (ec) throw Error("cannot resolve " + what + " " + library.string() + ": " + ec.message(), hint);
  const struct stat file = status_of(real, /*follow=*/false);
  Trust trust;
  trust.also = file.st_uid;
  trust.also_is = "the library's owner";
  if (writable_by_others(file.st_mode)) {
    throw Error(what + " " + library.string() + " can be written by other users (mode " + octal_mode(file.st_mode) + "), who decide what this process runs",
                hint + " (or chmod go-w " + real.string() + ")");
  }
  check_links_on_the_way(named, named, hint, trust);
  // The folder holding it, where the runtime also loads its providers from, and the one holding the
  // name it was given: nobody else may add to them, sticky or not.
  for (const fs::path& folder : {real.parent_path(), named.parent_path()}) {
    const fs::path resolved = fs::canonical(folder, ec);
    if (ec) throw Error("cannot resolve the folder of " + what + " " + library.string() + ": " + ec.message(), hint);
    const struct stat holding = status_of(resolved, /*follow=*/false);
    if (!trust.trusted(holding.st_uid)) {
      throw Error("the folder " + resolved.string() + " holding " + what + " " + library.string() + " belongs to " + user_name(holding.st_uid) +
                      ", who can replace what is in it (only " + trust.owners() + " may own it)",
                  hint);
    }
    if (writable_by_others(holding.st_mode)) {
      throw Error("the folder " + resolved.string() + " holding " + what + " " + library.string() + " can be written by other users (mode " +
                      octal_mode(holding.st_mode) + "), who decide what this process loads from it",
                  hint + " (or chmod go-w " + resolved.string() + ")");
    }
    check_folders_from(resolved.parent_path(), named, trust, hint);
  }
}

void write_private_file(const fs::path& path, const std::string& text, bool durable) {
  const fs::path partial = path.string() + ".partial-" + std::to_string(::getpid());
  auto fail = [&](const std::string& step) {
    const std::string reason = std::strerror(errno);
    std::error_code ec;
    fs::remove(partial, ec);
    return FolderNotWritable("cannot " + step + " " + path.string() + ": " + reason);
  };
  ::unlink(partial.c_str());  // a leftover of an earlier process with our pid
  {
    const UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw fail("create");
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) errno = EIO;
      if (n <= 0) throw fail("write");
      done += static_cast<size_t>(n);
    }
    if (durable && ::fsync(fd.get()) != 0) throw fail("flush");
  }
  if (::rename(partial.c_str(), path.c_str()) != 0) throw fail("publish");
}

PrivateDir PrivateDir::temporary(const std::string& prefix, bool removed_if_stopped) {
  std::error_code ec;
  const fs::path parent = fs::temp_directory_path(ec);
  if (ec) throw Error("no folder for temporary files: " + ec.message(), "Set TMPDIR to a folder you can write");
  if (removed_if_stopped) {
    // Its name registered before it is made: a name nobody can guess (72 random bits), mkdir'd with mode
    // 0700 (never an existing folder or a planted link: EEXIST, and another name).
    std::random_device random;
    static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name = (parent / (prefix + "-")).string();
      for (int i = 0; i < 12; ++i) name += kLetters[random() % (sizeof kLetters - 1)];
      auto registered = std::make_unique<RemoveOnTermination>(std::vector<std::string>{name});
      if (::mkdir(name.c_str(), 0700) == 0) {
        PrivateDir made(name, /*remove=*/true);
        made.removed_if_stopped_ = std::move(registered);
        return made;
      }
      if (errno != EEXIST) {
        throw FolderNotWritable("cannot make a temporary folder in " + parent.string() + ": " + std::strerror(errno),
                                "Set TMPDIR to a folder you can write");
      }
    }
    throw FolderNotWritable("cannot make a temporary folder in " + parent.string() + ": every name tried exists", "Set TMPDIR to a folder you can write");
  }
  std::string name = (parent / (prefix + "-XXXXXX")).string();
  // mkdtemp: a name nobody can guess, made with mode 0700 whatever the umask, and never an
  // existing folder or a symlink someone planted.
  if (::mkdtemp(name.data()) == nullptr) {
    throw FolderNotWritable("cannot make a temporary folder in " + parent.string() + ": " + std::strerror(errno),
                            "Set TMPDIR to a folder you can write");
  }
  return PrivateDir(name, /*remove=*/true);
}

PrivateDir PrivateDir::named(const fs::path& path, const std::string& hint) {
  ensure_private_dir(path, hint);
  return PrivateDir(path, /*remove=*/false);
}

PrivateDir::~PrivateDir() { remove(); }

void PrivateDir::remove() {
  if (!remove_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);  // removes symlinks inside, never what they point to
  remove_ = false;
}

PrivateDir::PrivateDir(PrivateDir&& other) noexcept
    : path_(std::move(other.path_)), remove_(other.remove_), removed_if_stopped_(std::move(other.removed_if_stopped_)) {
  other.remove_ = false;
}

PrivateDir& PrivateDir::operator=(PrivateDir&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    remove_ = other.remove_;
    removed_if_stopped_ = std::move(other.removed_if_stopped_);
    other.remove_ = false;
  }
  return *this;
}

}  // namespace ortfleet::detail
