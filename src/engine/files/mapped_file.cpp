#include "engine/files/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_reading.hpp"
#include "base/unique_fd.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"

namespace ortfleet::detail {

namespace {
FileIdentity identity_from(const struct stat& st) {
  FileIdentity id;
  id.inode = st.st_ino;
  id.bytes = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  id.regular = S_ISREG(st.st_mode);
  return id;
}
}  // namespace

std::optional<FileIdentity> identity_of(const std::string& path, Symlinks symlinks) {
  struct stat st {};
  const int rc = symlinks == Symlinks::follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (rc != 0) return std::nullopt;
  return identity_from(st);
}

MappedFile::MappedFile(const std::string& path, bool populate, Symlinks symlinks) : path_(path) {
  // Without waiting: a named pipe at the path would hold open() until someone wrote to it.
  const FileToRead file = open_file_to_read(path, "", "Give the path of a file you can read", symlinks == Symlinks::follow);
  const UniqueFd& fd = file.fd;
  const struct stat& st = file.status;
  identity_ = identity_from(st);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd.get(), 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      throw Error("cannot map " + path + ": " + std::strerror(errno), "Check free memory and address space");
    }
    ::madvise(data_, size_, MADV_SEQUENTIAL);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace ortfleet::detail
