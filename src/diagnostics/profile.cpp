// `ortfleet profile` run: one cold start in a fresh child process with ONNX Runtime's profiler and log
// on, its report built (profile_phases.cpp) with its floor (profile_floor.cpp), and a batch switch's
// cost measured for a model with a dynamic batch.
#include "ortfleet/diagnostics/profile.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/private_dir.hpp"
#include "diagnostics/cold_start.hpp"
#include "engine/cuda/cudnn_choices.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/throughput.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "process/child_process.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

ShapeSwitchCost measure_shape_switch(const std::string& model, const std::vector<std::string>& dynamic_dims, const Device& device,
                                     const RunConfig& config, double seconds, const std::string& ort_library) {
  ShapeSwitchCost cost;
  const bool dynamic_batch = std::any_of(dynamic_dims.begin(), dynamic_dims.end(),
                                         [](const std::string& d) { return d.find("[0]") != std::string::npos; });
  if (!dynamic_batch || seconds <= 0) return cost;
  ThroughputOptions t;
  t.model = model;
  t.devices = {device};
  t.seconds = seconds;
  t.config = config;
  t.ort_library = ort_library;
  t.shape_mix = {1, 2};
  t.anchors = false;
  const ThroughputReport mix = run_throughput(t);
  // Rows: batch 1 alone, batch 2 alone, then one session on the alternating mix (every call a switch).
  if (mix.rows.size() < 3) return cost;
  for (size_t i = 0; i < 3; ++i) {
    if (!mix.rows[i].error.empty()) throw Error("the shape-switch measurement failed: " + mix.rows[i].error, {}, device.to_string());
  }
  cost.steady_call_ms = (mix.rows[0].p50_ms + mix.rows[1].p50_ms) / 2;
  cost.call_ms = mix.rows[2].p50_ms;
  cost.cost_ms = std::max(0.0, cost.call_ms - cost.steady_call_ms);
  return cost;
}

namespace {

/// More than one GPU: one start of a fleet on them, in a fresh process, and what the driver's start
/// (cuInit and a context per worker) cost it.
void profile_fleet(const ProfileOptions& o, const std::string& ortfleet, ProfileReport& report) {
  if (!o.fleet || !o.device.is_cuda()) return;
  std::vector<Device> gpus;
  for (const auto& d : select_devices("all").devices) {
    if (d.is_cuda()) gpus.push_back(d);
  }
  if (gpus.size() < 2) return;
  report.fleet_devices = to_string(gpus);
  if (o.progress) o.progress("starting a fleet on " + report.fleet_devices + " once, for the driver's share");
  detail::ColdStartRequest request;
  request.model = o.model;
  request.devices = gpus;
  request.strategy = "fleet";
  request.config = o.config;
  request.ortfleet_executable = ortfleet;
  request.ort_library = o.ort_library;
  request.timeout_s = o.timeout_s;
  request.stop = o.stop;
  const detail::ColdStart fleet = detail::run_cold_start(request);
  detail::throw_if_stopped(o.stop);
  if (!fleet.ok()) {
    report.fleet_error = fleet.error;
    return;
  }
  report.fleet_driver = driver_start_of(fleet.report->timeline, fleet.report->spawn_ns, fleet.report->ready_ns);
}

}  // namespace

ProfileReport run_profile(const ProfileOptions& options) {
  const ProfileOptions& o = options;
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  const ModelFacts facts = inspect_model(o.model);
  const std::string ortfleet = detail::ortfleet_executable(o.ortfleet_executable);
  // The child writes ONNX Runtime's profile and log here: a folder nobody else can plant files or
  // symlinks in, removed at the end unless the user asked to keep it (--keep).
  const detail::PrivateDir work = o.work_dir.empty()
                                      ? detail::PrivateDir::temporary("ortfleet-profile")
                                      : detail::PrivateDir::named(o.work_dir, "Give --keep a folder only you can write");
  const fs::path& dir = work.path();
  const std::string log_path = (dir / "ort-log.jsonl").string();
  detail::ColdStartRequest request;
  request.model = o.model;
  request.devices = {o.device};
  request.strategy = "sequential";
  request.warmup_runs = 1 + o.steady_runs;
  request.config = o.config;
  request.arguments = {"--profile-dir", dir.string(), "--ort-log", log_path};
  request.ortfleet_executable = ortfleet;
  request.ort_library = o.ort_library;
  request.timeout_s = o.timeout_s;
  request.stop = o.stop;
  // On a GPU, the child keeps and reports cuDNN's choices as a worker does: the first inference is split
  // into cuDNN's heuristics, engine configurations and plan building.
  if (o.device.is_cuda()) request.environment = detail::cudnn_choices_environment(ortfleet);
  say("profiling one cold start of " + o.model + " on " + o.device.to_string());
  const detail::ColdStart child = detail::run_cold_start(request);
  detail::throw_if_stopped(o.stop);
  if (!child.ok()) throw Error("the profiled start failed: " + child.error, {}, o.device.to_string());
  const StartReport& start = *child.report;
  const std::string profile_path = start.devices.front().profile_path;
  auto report = build_profile(start, read_ort_log(log_path), profile_path.empty() ? std::vector<OrtProfileEvent>{} : read_ort_profile(profile_path), facts);
  report.config = o.config;
  say("measuring this machine's speeds for the floor");
  add_floor(report, measure_machine_speeds(o.device, o.model, facts.initializer_bytes));
  detail::throw_if_stopped(o.stop);
  if (o.shape_switch_seconds > 0 && !facts.dynamic_dims.empty()) say("measuring a batch switch");
  report.shape_switch = measure_shape_switch(o.model, facts.dynamic_dims, o.device, o.config, o.shape_switch_seconds, o.ort_library);
  detail::throw_if_stopped(o.stop);
  profile_fleet(o, ortfleet, report);
  if (!work.removed_at_end()) report.ort_profile_path = profile_path;  // a temporary one is gone when we return
  return report;
}

}  // namespace ortfleet
