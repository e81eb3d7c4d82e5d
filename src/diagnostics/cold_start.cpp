#include "diagnostics/cold_start.hpp"

#include <filesystem>
#include <optional>

#include "base/private_dir.hpp"
#include "ortfleet/base/error.hpp"
#include "process/child_process.hpp"

namespace ortfleet::detail {

RunConfig config_for_child(RunConfig config) {
  if (!config.warmup.inputs_file.empty()) config.warmup.inputs_file = std::filesystem::absolute(config.warmup.inputs_file).string();
  return config;
}

std::vector<std::string> cold_start_command(const ColdStartRequest& r, const std::string& config_file) {
  if (!r.command.empty()) return r.command;
  std::vector<std::string> argv = {r.ortfleet_executable, "-q"};
  if (!r.ort_library.empty()) argv.insert(argv.end(), {"--ort-lib", r.ort_library});
  argv.insert(argv.end(), {"start", r.model, "--devices", to_string(r.devices), "--strategy", r.strategy, "--ready-line",
                           "--config", config_file});
  if (r.warmup_runs > 0) argv.insert(argv.end(), {"--warmup", std::to_string(r.warmup_runs)});
  argv.insert(argv.end(), r.arguments.begin(), r.arguments.end());
  return argv;
}

void throw_if_stopped(const std::stop_token& stop) {
  if (stop.stop_requested()) throw Error("stopped on request: the run was interrupted");
}

ColdStart run_cold_start(const ColdStartRequest& request) {
  ColdStart out;
  // The config file lives in a folder of its own, nobody else's to write, for as long as the child runs.
  std::optional<PrivateDir> folder;
  std::string config_file;
  if (request.command.empty()) {
    folder.emplace(PrivateDir::temporary("ortfleet-start-config"));
    config_file = (folder->path() / "config.json").string();
    config_for_child(request.config).save(config_file);
  }
  const ChildResult child = run_child(cold_start_command(request, config_file), request.environment, "{", request.timeout_s, request.stop);
  out.stopped = child.stopped;
  out.crashed = child.crashed();
  if (child.report_line.empty() || child.stopped) {
    out.error = child.describe();
    return out;
  }
  try {
    out.report = StartReport::from_json(child.report_line);
  } catch (const Error& e) {
    out.error = e.what();
    return out;
  }
  for (const auto& d : out.report->devices) {
    if (d.state != DeviceState::ready) out.error += (out.error.empty() ? "" : "; ") + d.device.to_string() + ": " + d.error;
  }
  return out;
}

}  // namespace ortfleet::detail
