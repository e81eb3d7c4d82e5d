#include "base/elf_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/file_reading.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kThisMachine = EM_X86_64;
constexpr const char* kThisMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kThisMachine = EM_AARCH64;
constexpr const char* kThisMachineName = "AArch64";
#else
#error "ortfleet reads ELF libraries of x86-64 and AArch64 only"
#endif

std::string named(const std::string& what, const std::string& path) { return what.empty() ? path : what + " " + path; }

}  // namespace

ElfFile::ElfFile(const std::string& path, const std::string& what, const std::string& hint) : path_(path) {
  const FileToRead file = open_file_to_read(path, what, hint);
  const auto refuse = [&](const std::string& why) { return Error(named(what, path) + " " + why, hint); };
  size_ = static_cast<size_t>(file.status.st_size);
  char magic[SELFMAG] = {};
  if (::pread(file.fd.get(), magic, SELFMAG, 0) != SELFMAG || std::memcmp(magic, ELFMAG, SELFMAG) != 0) {
    throw refuse("is not a shared library (no ELF header)");
  }
  if (size_ < sizeof(Elf64_Ehdr)) throw refuse("is cut short: " + std::to_string(size_) + " bytes, shorter than an ELF header");
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
  if (mapped == MAP_FAILED) throw Error("cannot map " + named(what, path) + ": " + std::strerror(errno), hint);
  data_ = static_cast<const std::byte*>(mapped);
  std::memcpy(&header_, data_, sizeof(header_));
  try {
    if (header_.e_ident[EI_CLASS] != ELFCLASS64) throw refuse("is not a 64-bit ELF file");
    if (header_.e_ident[EI_DATA] != ELFDATA2LSB) throw refuse("is a big-endian ELF file; this machine reads little-endian ones");
    if (header_.e_phnum > 0 && (header_.e_phentsize != sizeof(Elf64_Phdr) || at<Elf64_Phdr>(header_.e_phoff, header_.e_phnum) == nullptr)) {
      throw refuse("is cut short or damaged: its program headers lie outside its " + std::to_string(size_) + " bytes");
    }
    if (header_.e_shnum > 0 && (header_.e_shentsize != sizeof(Elf64_Shdr) || at<Elf64_Shdr>(header_.e_shoff, header_.e_shnum) == nullptr)) {
      throw refuse("is cut short or damaged: its section headers lie outside its " + std::to_string(size_) + " bytes");
    }
  } catch (...) {
    ::munmap(mapped, size_);
    throw;
  }
}

ElfFile::~ElfFile() { ::munmap(const_cast<std::byte*>(data_), size_); }

std::vector<Elf64_Phdr> ElfFile::segments() const {
  const auto* table = at<Elf64_Phdr>(header_.e_phoff, header_.e_phnum);
  return table == nullptr ? std::vector<Elf64_Phdr>{} : std::vector<Elf64_Phdr>(table, table + header_.e_phnum);
}

std::optional<Elf64_Shdr> ElfFile::section_named(std::string_view name) const {
  const auto* sections = at<Elf64_Shdr>(header_.e_shoff, header_.e_shnum);
  if (sections == nullptr || header_.e_shstrndx >= header_.e_shnum) return std::nullopt;
  const Elf64_Shdr& names = sections[header_.e_shstrndx];
  const char* table = at<char>(names.sh_offset, names.sh_size);
  if (table == nullptr) return std::nullopt;
  for (size_t i = 0; i < header_.e_shnum; ++i) {
    const Elf64_Shdr& s = sections[i];
    if (s.sh_name >= names.sh_size) continue;
    const std::string_view found(table + s.sh_name, ::strnlen(table + s.sh_name, names.sh_size - s.sh_name));
    if (found != name) continue;
    return s;
  }
  return std::nullopt;
}

namespace {

/// The loaded segments of a library, to find the file bytes behind the loader's addresses.
class LoadedImage {
 public:
  LoadedImage(const ElfFile& elf, std::vector<Elf64_Phdr> loads) : elf_(elf), loads_(std::move(loads)) {}
  /// The file offset of `size` bytes at address `address`, when they lie in the file-backed part of
  /// one loaded segment (executable ones only, when `executable`).
  std::optional<uint64_t> offset_of(uint64_t address, uint64_t size, bool executable = false) const {
    for (const auto& p : loads_) {
      if (executable && (p.p_flags & PF_X) == 0) continue;
      if (address < p.p_vaddr || address - p.p_vaddr > p.p_filesz || size > p.p_filesz - (address - p.p_vaddr)) continue;
      return p.p_offset + (address - p.p_vaddr);
    }
    return std::nullopt;
  }
  template <typename T>
  const T* at_address(uint64_t address, uint64_t count) const {
    if (count > UINT64_MAX / sizeof(T)) return nullptr;
    const auto offset = offset_of(address, count * sizeof(T));
    return offset ? elf_.at<T>(*offset, count) : nullptr;
  }

 private:
  const ElfFile& elf_;
  std::vector<Elf64_Phdr> loads_;
};

/// The number of entries of the dynamic symbol table, from the hash table the loader looks symbols up
/// in (DT_GNU_HASH or DT_HASH): nullopt when that table lies outside the file.
std::optional<uint64_t> symbol_count(const LoadedImage& image, const std::optional<uint64_t>& gnu_hash, const std::optional<uint64_t>& hash) {
  if (gnu_hash) {
    const auto* head = image.at_address<uint32_t>(*gnu_hash, 4);
    if (head == nullptr) return std::nullopt;
    const uint32_t buckets = head[0];
    const uint32_t first = head[1];
    const uint32_t bloom_words = head[2];
    const uint64_t buckets_at = *gnu_hash + 16 + uint64_t{bloom_words} * 8;
    const auto* bucket = image.at_address<uint32_t>(buckets_at, buckets);
    if (bucket == nullptr) return std::nullopt;
    uint32_t last = 0;
    for (uint32_t b = 0; b < buckets; ++b) last = std::max(last, bucket[b]);
    if (last < first) return first;
    const uint64_t chains_at = buckets_at + uint64_t{buckets} * 4;
    for (uint64_t index = last;; ++index) {  // the last chain ends at the entry whose low bit is set
      const auto* chain = image.at_address<uint32_t>(chains_at + (index - first) * 4, 1);
      if (chain == nullptr) return std::nullopt;
      if ((*chain & 1u) != 0) return index + 1;
    }
  }
  if (hash) {
    const auto* head = image.at_address<uint32_t>(*hash, 2);
    if (head == nullptr || image.at_address<uint32_t>(*hash, 2 + uint64_t{head[0]} + head[1]) == nullptr) return std::nullopt;
    return head[1];
  }
  return std::nullopt;
}

}  // namespace

LibraryDynamics check_loadable_library(const std::string& path, const std::vector<std::string>& symbols, const std::string& what,
                                       const std::string& hint) {
  const ElfFile elf(path, what, hint);
  const auto refuse = [&](const std::string& why) {
    return Error(named(what, path) + " is not a shared library this process can load: " + why, hint);
  };
  const Elf64_Ehdr& h = elf.header();
  if (h.e_type != ET_DYN) throw refuse(h.e_type == ET_EXEC ? "it is a program" : h.e_type == ET_REL ? "it is an object file (.o)" : "it is no shared object");
  if (h.e_machine != kThisMachine) throw refuse(fmt::format("it is built for another architecture (ELF machine {}), not {}", h.e_machine, kThisMachineName));
  std::vector<Elf64_Phdr> loads;
  std::optional<Elf64_Phdr> dynamic;
  for (const auto& p : elf.segments()) {
    if (p.p_type == PT_DYNAMIC) dynamic = p;
    if (p.p_type != PT_LOAD) continue;
    if (p.p_offset > elf.size() || p.p_filesz > elf.size() - p.p_offset) {
      throw refuse(fmt::format("it is cut short: a loaded segment ends at byte {}, past its end at {} (the loader would map missing pages, SIGBUS)",
                               p.p_offset + p.p_filesz, elf.size()));
    }
    if (p.p_filesz > p.p_memsz) throw refuse("a loaded segment holds more of the file than of memory (damaged)");
    loads.push_back(p);
  }
  if (loads.empty()) throw refuse("it has no loaded segment");
  if (!dynamic) throw refuse("it has no dynamic section");
  const LoadedImage image(elf, loads);
  const uint64_t entries = dynamic->p_filesz / sizeof(Elf64_Dyn);
  const auto* dyn = elf.at<Elf64_Dyn>(dynamic->p_offset, entries);
  if (dyn == nullptr || !image.offset_of(dynamic->p_vaddr, dynamic->p_filesz)) throw refuse("its dynamic section lies outside its loaded bytes");
  std::optional<uint64_t> strtab, strsz, symtab, syment, gnu_hash, hash;
  std::vector<uint64_t> needed_at;
  std::vector<std::pair<uint64_t, uint64_t>> tables;  // (address, size) of what the loader reads at load time
  std::optional<uint64_t> rela, relasz, rel, relsz, jmprel, pltrelsz, init_array, init_arraysz, fini_array, fini_arraysz;
  bool ended = false;
  for (uint64_t i = 0; i < entries && !ended; ++i) {
    const uint64_t value = dyn[i].d_un.d_val;
    switch (dyn[i].d_tag) {
      case DT_NULL: ended = true; break;
      case DT_NEEDED: needed_at.push_back(value); break;
      case DT_STRTAB: strtab = value; break;
      case DT_STRSZ: strsz = value; break;
      case DT_SYMTAB: symtab = value; break;
      case DT_SYMENT: syment = value; break;
      case DT_GNU_HASH: gnu_hash = value; break;
      case DT_HASH: hash = value; break;
      case DT_RELA: rela = value; break;
      case DT_RELASZ: relasz = value; break;
      case DT_REL: rel = value; break;
      case DT_RELSZ: relsz = value; break;
      case DT_JMPREL: jmprel = value; break;
      case DT_PLTRELSZ: pltrelsz = value; break;
      case DT_INIT_ARRAY: init_array = value; break;
      case DT_INIT_ARRAYSZ: init_arraysz = value; break;
      case DT_FINI_ARRAY: fini_array = value; break;
      case DT_FINI_ARRAYSZ: fini_arraysz = value; break;
      default: break;
    }
  }
  if (!ended) throw refuse("its dynamic section does not end (no DT_NULL entry): it is damaged");
  if (!strtab || !strsz || !symtab) throw refuse("its dynamic section names no string or symbol table: it is damaged or was cut short");
  if (syment && *syment != sizeof(Elf64_Sym)) throw refuse("its symbol table's entries are not ELF64 symbols");
  const char* strings = image.at_address<char>(*strtab, *strsz);
  if (strings == nullptr) throw refuse("its string table lies outside its loaded bytes");
  const auto string_at = [&](uint64_t offset) -> std::optional<std::string_view> {
    if (offset >= *strsz) return std::nullopt;
    const size_t length = ::strnlen(strings + offset, *strsz - offset);
    if (offset + length >= *strsz) return std::nullopt;  // runs off the table's end
    return std::string_view(strings + offset, length);
  };
  const auto table_inside = [&](const char* name, const std::optional<uint64_t>& address, const std::optional<uint64_t>& size) {
    if (!address && !size) return;
    if (!address || !size || image.at_address<std::byte>(*address, *size) == nullptr) throw refuse(std::string("its ") + name + " lies outside its loaded bytes");
  };
  table_inside("relocation table", rela, relasz);
  table_inside("relocation table", rel, relsz);
  table_inside("PLT relocation table", jmprel, pltrelsz);
  table_inside("initialiser table", init_array, init_arraysz);
  table_inside("finaliser table", fini_array, fini_arraysz);
  LibraryDynamics out;
  for (const uint64_t offset : needed_at) {
    const auto name = string_at(offset);
    if (!name) throw refuse("a library it needs is named outside its string table");
    out.needed.emplace_back(*name);
  }
  if (!gnu_hash && !hash) throw refuse("it has no symbol hash table, so no symbol of it can be found");
  const auto count = symbol_count(image, gnu_hash, hash);
  if (!count) throw refuse("its symbol hash table lies outside its loaded bytes");
  const auto* table = image.at_address<Elf64_Sym>(*symtab, *count);
  if (table == nullptr) throw refuse("its symbol table lies outside its loaded bytes");
  for (const auto& wanted : symbols) {
    const Elf64_Sym* found = nullptr;
    for (uint64_t i = 0; i < *count && found == nullptr; ++i) {
      if (string_at(table[i].st_name) == std::string_view(wanted) && table[i].st_shndx != SHN_UNDEF) found = &table[i];
    }
    if (found == nullptr) throw refuse("it does not export " + wanted);
    const unsigned type = ELF64_ST_TYPE(found->st_info);
    const unsigned binding = ELF64_ST_BIND(found->st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || (binding != STB_GLOBAL && binding != STB_WEAK)) {
      throw refuse(wanted + " is not a function it exports");
    }
    if (!image.offset_of(found->st_value, 1, /*executable=*/true)) throw refuse(wanted + " lies outside its code");
  }
  return out;
}

std::vector<std::string> elf_needed_libraries(const std::string& path) {
  return check_loadable_library(path, {}, "", "Check the path").needed;
}

}  // namespace ortfleet::detail
