#include "diagnostics/elf_inspect.hpp"

#include <elf.h>

#include <cstring>

#include "engine/files/mapped_file.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {

struct ElfView {
  const std::byte* base;
  size_t size;
  Elf64_Ehdr header;

  template <typename T>
  const T* at(uint64_t offset, uint64_t count = 1) const {
    if (offset > size || count * sizeof(T) > size - offset) return nullptr;
    return reinterpret_cast<const T*>(base + offset);
  }
  const Elf64_Shdr* section(size_t index) const {
    if (index >= header.e_shnum) return nullptr;
    return at<Elf64_Shdr>(header.e_shoff + index * sizeof(Elf64_Shdr));
  }
};

ElfView open_elf(const MappedFile& file, const std::string& path) {
  ElfView v{static_cast<const std::byte*>(file.data()), file.size(), {}};
  const auto* header = v.at<Elf64_Ehdr>(0);
  if (header == nullptr || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64) {
    throw Error(path + " is not a 64-bit ELF shared library", "Check the path");
  }
  v.header = *header;
  if (v.at<Elf64_Shdr>(v.header.e_shoff, v.header.e_shnum) == nullptr) {
    throw Error(path + " has a truncated section table", "The file may be damaged; fetch it again");
  }
  return v;
}

}  // namespace

std::vector<std::string> elf_needed_libraries(const std::string& path) {
  MappedFile file(path);
  const ElfView elf = open_elf(file, path);
  std::vector<std::string> needed;
  for (size_t i = 0; i < elf.header.e_shnum; ++i) {
    const Elf64_Shdr* dyn = elf.section(i);
    if (dyn == nullptr || dyn->sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr* strtab = elf.section(dyn->sh_link);
    const auto* entries = elf.at<Elf64_Dyn>(dyn->sh_offset, dyn->sh_size / sizeof(Elf64_Dyn));
    if (strtab == nullptr || entries == nullptr) break;
    for (size_t k = 0; k < dyn->sh_size / sizeof(Elf64_Dyn) && entries[k].d_tag != DT_NULL; ++k) {
      if (entries[k].d_tag != DT_NEEDED || entries[k].d_un.d_val >= strtab->sh_size) continue;
      const char* name = reinterpret_cast<const char*>(elf.base + strtab->sh_offset + entries[k].d_un.d_val);
      needed.emplace_back(name, strnlen(name, strtab->sh_size - entries[k].d_un.d_val));
    }
  }
  return needed;
}

FatbinArchitectures parse_fatbin(const std::byte* data, size_t size) {
  // Layout (CUDA 11-13): a container is a 16-byte header {u32 magic 0xBA55ED50, u16 version,
  // u16 header size, u64 payload size} followed by entries {u16 kind (1 PTX, 2 ELF), u16, u32 entry
  // header size, u64 payload size, u32, u32, u16 minor, u16 major, u32 sm, ...}, each entry's
  // payload right after its header. Containers follow each other, 8-byte aligned.
  constexpr uint32_t kMagic = 0xBA55ED50;
  FatbinArchitectures out;
  auto read = [&](size_t offset, auto& value) {
    if (offset + sizeof(value) > size) return false;
    std::memcpy(&value, data + offset, sizeof(value));
    return true;
  };
  size_t pos = 0;
  while (pos + 16 <= size) {
    uint32_t magic = 0;
    uint16_t header_size = 0;
    uint64_t payload = 0;
    read(pos, magic);
    if (magic != kMagic) {
      pos += 8;
      continue;
    }
    read(pos + 6, header_size);
    read(pos + 8, payload);
    if (header_size < 16 || payload > size - pos - header_size) break;  // corrupt: stop, keep what we have
    ++out.containers;
    size_t entry = pos + header_size;
    const size_t end = pos + header_size + payload;
    while (entry + 32 <= end) {
      uint16_t kind = 0;
      uint32_t entry_header = 0;
      uint64_t entry_payload = 0;
      uint32_t sm = 0;
      read(entry, kind);
      read(entry + 4, entry_header);
      read(entry + 8, entry_payload);
      read(entry + 28, sm);
      if (entry_header < 32 || entry_payload > end - entry - entry_header) break;
      if (kind == 1) out.ptx.insert(static_cast<int>(sm));
      if (kind == 2) out.cubin.insert(static_cast<int>(sm));
      entry += entry_header + entry_payload;
    }
    pos = (end + 7) / 8 * 8;
  }
  return out;
}

FatbinArchitectures fatbin_architectures(const std::string& path) {
  MappedFile file(path);
  const ElfView elf = open_elf(file, path);
  const Elf64_Shdr* names = elf.section(elf.header.e_shstrndx);
  if (names == nullptr) return {};
  for (size_t i = 0; i < elf.header.e_shnum; ++i) {
    const Elf64_Shdr* s = elf.section(i);
    if (s == nullptr || s->sh_name >= names->sh_size) continue;
    const char* name = reinterpret_cast<const char*>(elf.base + names->sh_offset + s->sh_name);
    if (std::strncmp(name, ".nv_fatbin", names->sh_size - s->sh_name) != 0) continue;
    if (elf.at<std::byte>(s->sh_offset, s->sh_size) == nullptr) throw Error(path + ": .nv_fatbin lies outside the file");
    return parse_fatbin(elf.base + s->sh_offset, s->sh_size);
  }
  return {};
}

ArchSupport arch_support(const FatbinArchitectures& fatbin, int sm) {
  for (int have : fatbin.cubin) {
    if (have / 10 == sm / 10 && have % 10 <= sm % 10) return ArchSupport::native;
  }
  for (int have : fatbin.ptx) {
    if (have <= sm) return ArchSupport::ptx_jit;
  }
  return ArchSupport::none;
}

}  // namespace ortfleet::detail
