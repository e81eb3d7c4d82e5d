// One libFuzzer target per parser (ORTFLEET_FUZZ_TARGET names it), built with clang when
// ORTFLEET_BUILD_FUZZERS is on. Run as: ortfleet_fuzz_<target> [corpus folder] -max_total_time=600
// A seed corpus: ortfleet_fuzz_<target> -write_seeds=DIR (the valid inputs the mutation test starts from).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_targets.hpp"

namespace {
const ortfleet::fuzz::Target& the_target() {
  static const auto& t = ortfleet::fuzz::target(ORTFLEET_FUZZ_TARGET);
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = (*argv)[i];
    if (arg.rfind("-write_seeds=", 0) != 0) continue;
    const std::filesystem::path dir(std::string(arg.substr(13)));
    std::filesystem::create_directories(dir);
    int n = 0;
    for (const auto& seed : the_target().seeds()) {
      std::ofstream(dir / ("seed-" + std::to_string(n++)), std::ios::binary) << seed;
    }
    std::printf("wrote %d seeds of %s to %s\n", n, the_target().name, dir.c_str());
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exception other than ortfleet::Error escapes run_one, reaches here and aborts: a finding.
  ortfleet::fuzz::run_one(the_target(), std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
