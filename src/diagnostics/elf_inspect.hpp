#pragma once
// What GPU code a shared library carries, without loading it: the CUDA fat binary (.nv_fatbin) of an
// ELF64 file, read through base's ELF reader (base/elf_file.hpp, which also says what it needs:
// elf_needed_libraries).
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "base/elf_file.hpp"

namespace ortfleet::detail {

struct FatbinArchitectures {
  std::set<int> cubin;  ///< machine code, by SM number (90 = sm_90)
  std::set<int> ptx;    ///< PTX the driver can JIT-compile
  int containers = 0;
};

/// Parses a .nv_fatbin section's bytes (a sequence of fat binary containers).
FatbinArchitectures parse_fatbin(const std::byte* data, size_t size);
/// The architectures in an ELF file's .nv_fatbin section (empty when it has none).
FatbinArchitectures fatbin_architectures(const std::string& path);

enum class ArchSupport { native, ptx_jit, none };
/// Whether code for GPU architecture `sm` (e.g. 90) is present: machine code for it (or for an
/// older minor of the same major, which the driver runs as is), else PTX it can JIT, else none.
ArchSupport arch_support(const FatbinArchitectures& fatbin, int sm);

}  // namespace ortfleet::detail
