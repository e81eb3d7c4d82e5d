// `doctor MODEL`: the model's file read, then one cold start of it on the device in a fresh process, so
// that a crash ends that process and the doctor says what to do next.
#include "diagnostics/doctor_model.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "diagnostics/cold_start.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "process/child_process.hpp"

namespace ortfleet::detail {

namespace {

/// "resnet18.onnx: 49 nodes, opset 17, 46.8 MB of weights (external data)".
std::string model_text(const ModelCheck& m) {
  return fmt::format("{}: {}, opset {}, {} of weights{}", std::filesystem::path(m.model).filename().string(), count_text(static_cast<uint64_t>(m.facts.nodes), "node"),
                     m.facts.opset, bytes_text(m.facts.initializer_bytes), m.facts.external_data ? " (external data)" : "");
}

std::string dims_text(const std::vector<std::string>& dims) {
  std::string out;
  for (const auto& d : dims) out += (out.empty() ? "" : ", ") + d;
  return out;
}

}  // namespace

void check_model(DoctorReport& report, const DoctorOptions& o) {
  ModelCheck m;
  m.model = o.model;
  m.device = o.device.to_string();
  try {
    validate_model_file(o.model);
    m.facts = inspect_model(o.model);
  } catch (const std::exception& e) {
    const Error error = Error::from(e);
    m.file_error = error.what_failed();
    report.findings.push_back({"model", Verdict::fail, o.model + " cannot be started: " + m.file_error, error.hint()});
    report.model = m;
    return;
  }
  ColdStartRequest request;
  request.model = o.model;
  request.devices = {o.device};
  request.strategy = "sequential";
  request.config = o.config;
  request.ortfleet_executable = ortfleet_executable(o.ortfleet_executable);
  request.ort_library = o.ort_library;
  request.timeout_s = o.timeout_s;
  request.stop = o.stop;
  const ColdStart start = run_cold_start(request);
  throw_if_stopped(o.stop);
  m.started = start.ok();
  m.crashed = start.crashed;
  m.error = start.error;
  if (m.started) {
    m.ready_ms = start.report->wall_ms();
    report.findings.push_back({"model", Verdict::ok,
                               fmt::format("{} starts on {}: ready {} after exec (one cold start in a fresh process, its first inference "
                                           "run); `ortfleet profile` says where that time goes",
                                           model_text(m), m.device, duration_text(m.ready_ms)),
                               {}});
  } else if (m.crashed) {
    report.findings.push_back({"model", Verdict::fail, fmt::format("{} crashes ONNX Runtime on {}: the start {}", model_text(m), m.device, m.error),
                               fmt::format("find the node that crashes, and a work-around: ortfleet doctor {} --device {} --locate-crash", o.model,
                                           m.device)});
  } else {
    report.findings.push_back({"model", Verdict::fail, fmt::format("{} does not start on {}: {}", model_text(m), m.device, m.error),
                               fmt::format("ortfleet -v start {} --devices {} says more", o.model, m.device)});
  }
  if (!m.facts.dynamic_dims.empty()) {
    report.findings.push_back({"model-shapes", Verdict::info,
                               "inputs with dims of no fixed size: " + dims_text(m.facts.dynamic_dims) +
                                   "; the start ran them at size 1, and each size a call gives them is a shape of its own: " + shape_advice(o.device),
                               {}});
  }
  report.model = m;
}

}  // namespace ortfleet::detail
