// Paths in what a pool is asked to do, made absolute where they are named (pool_paths.hpp).
#include "fleet/pool/pool_paths.hpp"

#include <filesystem>
#include <system_error>

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::string absolute_in(const std::string& path, const std::string& folder) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  std::error_code ec;
  const fs::path base = folder.empty() ? fs::current_path(ec) : fs::path(folder);
  if (ec) return path;
  return (base / path).lexically_normal().string();
}

RunConfig with_absolute_paths(RunConfig config, const std::string& folder) {
  config.warmup.inputs_file = absolute_in(config.warmup.inputs_file, folder);
  config.session.model_cache_shared = absolute_in(config.session.model_cache_shared, folder);
  for (auto& library : config.session.custom_op_libraries) library = absolute_in(library, folder);
  return config;
}

LocalStartPlan with_absolute_paths(LocalStartPlan plan, const std::string& folder) {
  plan.model_path = absolute_in(plan.model_path, folder);
  plan.cache_dir = absolute_in(plan.cache_dir, folder);
  plan.profile_dir = absolute_in(plan.profile_dir, folder);
  plan.ort_library = absolute_in(plan.ort_library, folder);
  plan.config = with_absolute_paths(std::move(plan.config), folder);
  return plan;
}

std::string working_folder_of(int pid) {
  std::error_code ec;
  const fs::path folder = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec);
  return ec ? std::string() : folder.string();
}

}  // namespace ortfleet::detail
