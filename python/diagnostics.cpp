// ortfleet's diagnostics from Python: load_runtime, doctor, bench, profile and tune, each answering
// what the command's --json prints, as a dict.
#include "arguments.hpp"
#include "bindings.hpp"
#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/diagnostics/tune.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet::python {

namespace {

/// What `run()` reports, as the command's --json prints it, as Python objects; the GIL is released
/// while it runs.
template <typename Run>
py::object json_report(Run run) {
  decltype(run()) report;
  {
    py::gil_scoped_release release;
    report = run();
  }
  return parse_json(report.to_json());
}

/// device=None: the default device (the first GPU, else the CPU).
Device device_or_default(const py::object& device) { return device.is_none() ? default_device() : to_device(device); }

}  // namespace

void bind_diagnostics(py::module_& m) {
  m.def("load_runtime", [](const std::string& library) {
    const RuntimeInfo& rt = load_runtime(library);
    py::dict d;
    d["path"] = rt.library_path;
    d["source"] = rt.source;
    d["version"] = rt.version;
    d["providers"] = rt.providers;
    return d;
  }, py::arg("library") = "", "Load ONNX Runtime (the search order of the command line) and describe it");

  m.def("doctor", [](const std::string& ort_library) {
    DoctorOptions o;
    o.ort_library = ort_library;
    return json_report([&] { return run_doctor(o); });
  }, py::arg("ort_library") = "", "What `ortfleet doctor --json` reports, as a dict");

  m.def("bench", [](const std::string& model, const py::object& devices, int runs, int warmup, bool anchors,
                    const std::string& python, const py::object& config) {
    BenchOptions o;
    o.model = model;
    o.devices = to_devices(devices);
    o.runs = runs;
    o.warmup_rounds = warmup;
    o.anchors = anchors;
    o.python = python;
    o.config = to_config(config);
    check_config_against_model(o.config, o.model);  // before any child process: options.hpp
    return json_report([&] { return run_bench(o); });
  }, py::arg("model"), py::arg("devices") = py::none(), py::arg("runs") = BenchOptions{}.runs, py::arg("warmup") = 1, py::arg("anchors") = true,
     py::arg("python") = "python3", py::arg("config") = py::none(), "What `ortfleet bench --json` reports, as a dict");

  m.def("profile", [](const std::string& model, const py::object& device, int runs, const py::object& config) {
    ProfileOptions o;
    o.model = model;
    o.device = device_or_default(device);
    o.steady_runs = runs;
    o.config = to_config(config);
    check_config_against_model(o.config, o.model);  // before any child process: options.hpp
    return json_report([&] { return run_profile(o); });
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("runs") = 20, py::arg("config") = py::none(),
     "What `ortfleet profile --json` reports, as a dict");

  m.def("tune", [](const std::string& model, const py::object& device, bool quick, int runs, const py::object& config) {
    TuneOptions o;
    o.model = model;
    o.device = device_or_default(device);
    o.quick = quick;
    o.steady_runs = runs;
    o.base = to_config(config);
    check_config_against_model(o.base, o.model);  // before any child process: options.hpp
    return json_report([&] { return run_tune(o); });
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("quick") = true, py::arg("runs") = 30, py::arg("config") = py::none(),
     "What `ortfleet tune --json` reports, as a dict");
}

}  // namespace ortfleet::python
