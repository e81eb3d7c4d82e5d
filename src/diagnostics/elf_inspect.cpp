#include "diagnostics/elf_inspect.hpp"

#include <cstring>

#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

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
  const ElfFile elf(path, "", "Check the path");
  const auto fatbin = elf.section_named(".nv_fatbin");
  if (!fatbin) return {};
  const auto* bytes = elf.at<std::byte>(fatbin->sh_offset, fatbin->sh_size);
  if (bytes == nullptr) throw Error(path + ": .nv_fatbin lies outside the file");
  return parse_fatbin(bytes, fatbin->sh_size);
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
