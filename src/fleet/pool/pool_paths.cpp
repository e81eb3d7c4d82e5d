// Paths in what a pool is asked to do, made absolute where they are named (pool_paths.hpp).
#include "fleet/pool/pool_paths.hpp"

#include <filesystem>
#include <system_error>

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::string working_folder_of(int pid) {
  std::error_code ec;
  const fs::path folder = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec);
  return ec ? std::string() : folder.string();
}

}  // namespace ortfleet::detail
