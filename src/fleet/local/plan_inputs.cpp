#include "fleet/local/plan_inputs.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>

namespace ortfleet::detail {
namespace fs = std::filesystem;

OwnedPlanInputs::OwnedPlanInputs(LocalStartPlan& plan) {
  std::vector<std::string*> files;
  if (!plan.config.warmup.inputs_file.empty()) files.push_back(&plan.config.warmup.inputs_file);
  for (auto& library : plan.config.session.custom_op_libraries) files.push_back(&library);
  if (files.empty()) return;
  try {
    folder_.emplace(PrivateDir::temporary("ortfleet-plan-inputs"));
  } catch (const std::exception& e) {
    spdlog::warn("the start's input files are read where the job left them ({})", e.what());
    return;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::string& path = *files[i];
    // Each in a folder of its own, under its own name: a custom-op library keeps its file name, and two
    // inputs of the same name do not meet.
    const fs::path copy = folder_->path() / std::to_string(i) / fs::path(path).filename();
    std::error_code ec;
    fs::create_directory(copy.parent_path(), ec);
    if (!ec) fs::copy_file(path, copy, fs::copy_options::none, ec);
    if (ec) {
      spdlog::warn("could not keep a copy of {} for work after the job: {}", path, ec.message());
      continue;
    }
    path = copy.string();
  }
}

}  // namespace ortfleet::detail
