#pragma once
// Folders ortfleet writes into, safe from other local users: a fresh temporary folder nobody else can
// enter (mkdtemp: an unguessable name, mode 0700), or a folder named by the user or the environment
// (the model cache, `profile --keep`), made 0700 when missing and refused when another user could
// change what is in it. Writing into a folder someone else controls lets them choose what we
// overwrite (a planted symlink) or what we later read back (a planted model).
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "base/termination_cleanup.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

/// A folder that could not be made or written (read-only file system, full disk, no permission):
/// unlike an unsafe folder, a reason to do without it (the model cache) rather than to stop.
class FolderNotWritable : public Error {
 public:
  using Error::Error;
};

/// Makes `path` and its missing parents (each with mode 0700), then checks that only this user can
/// change it: the folder is owned by this user and not group- or world-writable, and every folder
/// above it (and every symlink on the way) is owned by this user or root, and writable by others
/// only when sticky (/tmp). Nothing is made in a folder that fails those checks. Throws
/// ortfleet::Error naming the folder and the fix (`hint`, e.g. "Set ORTFLEET_CACHE to ..."); a folder
/// that cannot be made (read-only file system, no permission) throws FolderNotWritable.
void ensure_private_dir(const std::filesystem::path& path, const std::string& hint);

/// ensure_private_dir with the folders it makes given `mode` (exactly, whatever the umask): 0755 for a
/// folder other users read (a shared cache layer), which still only this user may write.
void make_dir_safely(const std::filesystem::path& path, mode_t mode, const std::string& hint);

/// Checks a folder other users made for this one to read (the shared cache layer's models folder,
/// `path`, in the layer `layer`), as sshd's StrictModes checks a user's keys: it, every folder above
/// it and every symlink on the way are owned by root, this user or the layer's owner (whom the user
/// trusts by naming the layer, as the owner of their model files), it is writable by nobody else, and
/// those above it are writable by others only when sticky. Returns the layer's owner. Throws
/// ortfleet::Error naming the component that fails and why.
uid_t check_shared_dir(const std::filesystem::path& path, const std::filesystem::path& layer, const std::string& hint);
/// A file in such a folder: owned by root, this user or `layer_owner`, and writable by nobody else
/// (nothing when it is missing). Throws ortfleet::Error naming it.
void check_shared_file(const std::filesystem::path& file, uid_t layer_owner, const std::string& hint);

/// A library this process will load (`what`: "the ONNX Runtime library"), as sshd's StrictModes checks
/// a user's keys: the file it resolves to is writable by nobody but its owner, and that owner, the
/// owner of the folder holding it (where the runtime also finds its providers) and of every folder
/// above it and every symlink on the way are root, this user or the library's owner (whom the user
/// trusts by running it); the folder holding it is writable by nobody else, those above it by others
/// only when sticky (/tmp). Throws ortfleet::Error naming what another user could change.
void check_library_owners(const std::filesystem::path& library, const std::string& what, const std::string& hint);

/// The same checks for a folder that must already exist (false when it does not).
bool check_private_dir(const std::filesystem::path& path, const std::string& hint);

/// Writes `text` to `path` as a whole or not at all: into `path`.partial-<pid> (made with O_EXCL and
/// O_NOFOLLOW, mode 0600 whatever the umask), flushed to disk when `durable`, then renamed over
/// `path`. On failure the partial file is removed and FolderNotWritable says why (a full disk, a
/// read-only file system, a planted folder in the way).
void write_private_file(const std::filesystem::path& path, const std::string& text, bool durable);

/// A folder ortfleet writes into for one command, removed with everything in it when this goes away,
/// unless the user named it.
class PrivateDir {
 public:
  /// A fresh folder in $TMPDIR (else /tmp) named `prefix`-XXXXXX, mode 0700; removed by the destructor.
  /// Where `removed_if_stopped`, also by the termination handler of a process told to stop
  /// (termination_cleanup.hpp), from before it exists: a stop between its making and a registration
  /// after it left the folder behind (a fill's price folder, issue 58's audit).
  static PrivateDir temporary(const std::string& prefix, bool removed_if_stopped = false);
  /// The folder the user named: made and checked by ensure_private_dir, and kept.
  static PrivateDir named(const std::filesystem::path& path, const std::string& hint);

  ~PrivateDir();
  PrivateDir(PrivateDir&& other) noexcept;
  PrivateDir& operator=(PrivateDir&& other) noexcept;
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Whether the destructor removes it.
  bool removed_at_end() const { return remove_; }

 private:
  PrivateDir(std::filesystem::path path, bool remove) : path_(std::move(path)), remove_(remove) {}
  void remove();
  std::filesystem::path path_;
  bool remove_ = false;
  std::unique_ptr<RemoveOnTermination> removed_if_stopped_;
};

}  // namespace ortfleet::detail
