#include <gtest/gtest.h>

#include <cstring>

#include "diagnostics/elf_inspect.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {

namespace {
/// A fat binary container as nvcc writes it: header, then entries each followed by its payload.
std::vector<std::byte> container(const std::vector<std::pair<uint16_t, uint32_t>>& entries) {
  std::vector<std::byte> out(16);
  for (auto [kind, sm] : entries) {
    std::vector<std::byte> e(64 + 8);  // 64-byte entry header, 8 bytes of payload
    const uint32_t header = 64;
    const uint64_t payload = 8;
    std::memcpy(e.data(), &kind, 2);
    std::memcpy(e.data() + 4, &header, 4);
    std::memcpy(e.data() + 8, &payload, 8);
    std::memcpy(e.data() + 28, &sm, 4);
    out.insert(out.end(), e.begin(), e.end());
  }
  const uint32_t magic = 0xBA55ED50;
  const uint16_t version = 1;
  const uint16_t header_size = 16;
  const uint64_t size = out.size() - 16;
  std::memcpy(out.data(), &magic, 4);
  std::memcpy(out.data() + 4, &version, 2);
  std::memcpy(out.data() + 6, &header_size, 2);
  std::memcpy(out.data() + 8, &size, 8);
  return out;
}
}  // namespace

TEST(ElfInspect, FatbinContainersListMachineCodeAndPtx) {
  auto blob = container({{2, 80}, {2, 90}, {1, 90}});
  const auto second = container({{2, 120}});
  blob.insert(blob.end(), second.begin(), second.end());
  const auto archs = parse_fatbin(blob.data(), blob.size());
  EXPECT_EQ(archs.containers, 2);
  EXPECT_EQ(archs.cubin, (std::set<int>{80, 90, 120}));
  EXPECT_EQ(archs.ptx, (std::set<int>{90}));
}

TEST(ElfInspect, CorruptFatbinsStopWithoutReadingPastTheEnd) {
  auto blob = container({{2, 80}});
  const uint64_t huge = 1ull << 40;
  std::memcpy(blob.data() + 8, &huge, 8);
  EXPECT_EQ(parse_fatbin(blob.data(), blob.size()).containers, 0);
  EXPECT_EQ(parse_fatbin(blob.data(), 10).containers, 0);
}

TEST(ElfInspect, ArchSupportFollowsCudaCompatibility) {
  FatbinArchitectures a;
  a.cubin = {80, 90};
  a.ptx = {75};
  EXPECT_EQ(arch_support(a, 90), ArchSupport::native);
  EXPECT_EQ(arch_support(a, 86), ArchSupport::native);   // sm_80 code runs on sm_86
  EXPECT_EQ(arch_support(a, 100), ArchSupport::ptx_jit);  // only PTX fits
  FatbinArchitectures b;
  b.cubin = {90};
  EXPECT_EQ(arch_support(b, 100), ArchSupport::none);
  EXPECT_EQ(arch_support(b, 80), ArchSupport::none);     // newer code never runs on older GPUs
}

TEST(ElfInspect, ReadsNeededLibrariesOfARealLibrary) {
  load_runtime();
  const auto needed = elf_needed_libraries(loaded_runtime()->library_path);
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end());
  EXPECT_THROW(elf_needed_libraries(test::mlp_model()), Error);  // not ELF
}

TEST(ElfInspect, TheFetchedCudaEpCarriesHopperCode) {
  load_runtime();
  const auto ep = find_cuda_ep();
  if (!ep) GTEST_SKIP() << "the CUDA EP library was not fetched (scripts/fetch-onnxruntime.sh --gpu)";
  const auto archs = fatbin_architectures(ep->path);
  EXPECT_GT(archs.containers, 0);
  EXPECT_EQ(arch_support(archs, 90), ArchSupport::native);
  const auto needed = elf_needed_libraries(ep->path);
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libcudart.so.13"), needed.end());
}

}  // namespace ortfleet::detail
