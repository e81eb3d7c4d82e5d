// Paths in a start's plan made absolute where they are named (plan_paths.hpp).
#include "fleet/local/plan_paths.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/environment.hpp"

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

namespace {
/// ortfleet's variables that name files or folders: a process working in "/" reads their relative
/// values from the folder it was started in.
constexpr EnvVar kPathVariables[] = {EnvVar::cache,   EnvVar::cache_shared,  EnvVar::ort_lib, EnvVar::ort_root,
                                     EnvVar::cuda_ep, EnvVar::cudnn_choices, EnvVar::worker};
}  // namespace

std::string work_in_root() {
  std::error_code ec;
  const fs::path before = fs::current_path(ec);
  std::vector<std::string> names = {"TMPDIR", "XDG_CACHE_HOME"};
  for (const EnvVar v : kPathVariables) names.push_back(env_name(v));
  for (const auto& name : names) {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0' || std::string(value) == "0") continue;
    const std::string absolute = absolute_in(value, "");
    if (absolute != value) ::setenv(name.c_str(), absolute.c_str(), 1);
  }
  if (::chdir("/") != 0) return ec ? std::string() : before.string();
  return ec ? std::string() : before.string();
}

}  // namespace ortfleet::detail
