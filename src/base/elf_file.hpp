#pragma once
// ELF64 shared libraries read without loading them: the one reader of ortfleet's (the runtime's and a
// custom-op library's check before dlopen, doctor's look at the CUDA provider). dlopen trusts the file
// it maps: a truncated library (a segment past the file's end) kills the process with SIGBUS, one
// whose dynamic section is zeros with SIGSEGV, and the crash lands in the caller (a user's Python
// interpreter). check_loadable_library reads what the loader will read, first.
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet::detail {

/// An ELF64 file of this machine's byte order, mapped read-only (opened as open_file_to_read does:
/// never waiting on a pipe), its header and program and section header tables checked to lie inside
/// it.
class ElfFile {
 public:
  /// Throws ortfleet::Error naming `what` and `path` ("the custom-op library /x.so is not a 64-bit
  /// ELF file"), with `hint`.
  ElfFile(const std::string& path, const std::string& what, const std::string& hint);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  const Elf64_Ehdr& header() const { return header_; }
  size_t size() const { return size_; }
  /// `count` records of T at `offset`, or null when they do not all lie inside the file.
  template <typename T>
  const T* at(uint64_t offset, uint64_t count = 1) const {
    if (offset > size_ || count > (size_ - offset) / sizeof(T)) return nullptr;
    return reinterpret_cast<const T*>(data_ + offset);
  }
  /// The program headers (empty when the file has none).
  std::vector<Elf64_Phdr> segments() const;
  /// The section called `name` (".nv_fatbin") when the section table has it (its bytes may lie
  /// outside the file: at() tells).
  std::optional<Elf64_Shdr> section_named(std::string_view name) const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  Elf64_Ehdr header_{};
};

/// What the loader would read of a shared library, found whole: the libraries it needs (DT_NEEDED).
struct LibraryDynamics {
  std::vector<std::string> needed;
};

/// Checks that `path` is a shared library this process can load whole, as far as reading the file can
/// tell, and that it exports each of `symbols` as a function: a shared object (ET_DYN) for this
/// machine's architecture, every loaded segment inside the file, a dynamic section inside a loaded
/// segment that ends, names its string and symbol tables and a hash table, each of them (and the
/// relocation and initialiser tables it names) inside the file's loaded bytes, and each symbol
/// defined in an executable segment. Throws ortfleet::Error "WHAT PATH is not a shared library this
/// process can load: ... " naming what is wrong, with `hint`. Returns what it read.
LibraryDynamics check_loadable_library(const std::string& path, const std::vector<std::string>& symbols, const std::string& what,
                                       const std::string& hint);

/// The DT_NEEDED entries of the ELF64 shared object at `path` (read through its section table, as
/// doctor reads libraries it does not load). Throws ortfleet::Error if it is not one.
std::vector<std::string> elf_needed_libraries(const std::string& path);

}  // namespace ortfleet::detail
