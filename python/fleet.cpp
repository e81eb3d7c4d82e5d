// ortfleet.Fleet and the RunFuture of its run_async: one ready ONNX Runtime session per device.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <optional>

#include "arguments.hpp"
#include "bindings.hpp"
#include "log_bridge.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "pool.hpp"
#include "setting_words.hpp"
#include "tensors.hpp"
#include "waiting.hpp"

namespace ortfleet::python {

namespace {

/// Fleet.run_async's answer, shaped like concurrent.futures.Future: result(timeout), done(). Holds
/// the inputs' Python objects until the run has read them.
class PyRunFuture {
 public:
  PyRunFuture(std::future<std::vector<Tensor>> future, PreparedInputs inputs)
      : inputs_(std::move(inputs)), future_(future.share()) {}

  bool done() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  py::dict result(const std::optional<double>& timeout) {
    const bool ready = wait_interruptibly(
        [&](double slice_s) { return future_.wait_for(std::chrono::duration<double>(slice_s)) == std::future_status::ready; }, timeout);
    std::vector<Tensor> outputs;
    if (ready) {
      GilReleased release;
      outputs = future_.get();  // throws the run's error
    }
    if (!ready) {
      PyErr_SetString(PyExc_TimeoutError, "the run did not finish within the timeout");
      throw py::error_already_set();
    }
    return outputs_dict(outputs);
  }

 private:
  PreparedInputs inputs_;  // destroyed after future_, which waits for a run on a thread of this process
  std::shared_future<std::vector<Tensor>> future_;
};

/// What a fleet left behind, said once where a Python user sees it: the warm pool, which outlives the
/// job, as a LeftBehindWarning (shown once per line of the script by default, filterable, an error
/// under `python -W error`); the rest (a cache entry made in the background, a pool that could not be
/// left) as an INFO record of the logger "ortfleet".
void say_left_behind(const std::vector<LeftBehind>& left) {
  for (const auto& l : left) {
    const std::string text = "ortfleet " + in_keywords(terminal_text(l.note));  // a model's path in it, as text
    if (l.kind != LeftBehind::Kind::warm_pool) {
      py::module_::import("logging").attr("getLogger")("ortfleet").attr("info")(text);
      continue;
    }
    const py::object category = py::module_::import("ortfleet._ortfleet").attr("LeftBehindWarning");
    if (PyErr_WarnEx(category.ptr(), text.c_str(), 1) != 0) throw py::error_already_set();  // the warning made an error
  }
}

class PyFleet {
 public:
  /// Fleet's options from its keywords, each a row of the settings table (arguments.hpp, fleet_options).
  PyFleet(const std::string& model, const py::object& devices, const py::kwargs& keywords) {
    checked_text(Setting::model, model);
    const FleetOptions o = fleet_options(devices, keywords, warmup_file_);
    start_timeout_s_ = o.start_timeout_s;
    GilReleased release;
    check_config_against_model(o.config, model);  // raised here, not as a failed device after wait()
    fleet_ = std::make_unique<Fleet>(model, o);
  }
  PyFleet(const PyFleet&) = delete;
  PyFleet& operator=(const PyFleet&) = delete;
  /// A fleet nobody shut down (no `with`, no shutdown()) still says what it left, when Python collects it.
  ~PyFleet() {
    try {
      shutdown();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ortfleet: shutting a fleet down: %s\n", e.what());
    }
  }

  PyFleet& start() {
    {
      GilReleased release;
      fleet().start();
    }
    started_at_ = std::chrono::steady_clock::now();
    return *this;
  }
  bool wait(const std::optional<double>& timeout) {
    if (timeout && !(*timeout >= 0)) return fleet().wait(*timeout);  // its refusal
    Fleet& f = fleet();
    bool all_ready = false;
    wait_interruptibly(
        [&](double slice_s) {
          all_ready = f.wait(slice_s);
          return all_ready || settled();
        },
        timeout);
    // Buckets every device refused once the model ran (padding changed its outputs): raised, as a
    // setting refused before the start is.
    const auto devices = f.status();
    if (!all_ready && !devices.empty() && std::all_of(devices.begin(), devices.end(), [](const DeviceStatus& d) { return refuses_buckets(d.error); })) {
      throw Error(devices.front().error);
    }
    return all_ready;
  }
  bool ready(const py::object& device) { return fleet().ready(fleet_device(device)); }
  py::list left_behind() {
    std::vector<LeftBehind> left;
    {
      GilReleased release;
      left = fleet().what_is_left();
    }
    said_left_behind_ = true;  // read, so seen: not said again at shutdown
    py::list out;
    for (const auto& l : left) out.append(in_keywords(l.note));
    return out;
  }
  std::optional<std::string> wait_for_cache_fill(double timeout) {
    Fleet& f = fleet();
    if (!started_at_) return std::nullopt;  // nothing started, nothing in the making
    std::optional<std::string> outcome;
    wait_interruptibly(
        [&](double slice_s) {
          if (!settled()) {  // the start first: the entry is made after it
            f.wait(slice_s);
            return false;
          }
          outcome = f.wait_for_cache_fill(slice_s);
          return outcome.has_value() || !f.making_cache_entry();
        },
        timeout);
    return outcome;
  }
  py::list status() {
    py::list out;
    for (const auto& s : fleet().status()) out.append(parse_json(s.to_json()));  // as `ortfleet start --json` prints it
    return out;
  }
  py::dict run(const py::object& device, const py::dict& inputs, bool outputs_on_device) {
    const Device d = fleet_device(device);
    PreparedInputs prepared = prepare(inputs);
    wait_while_starting(d);
    std::vector<Tensor> outputs;
    if (in_worker(d)) {
      // The run is another process's work: a Ctrl-C need not wait for it (its outputs are dropped).
      std::future<std::vector<Tensor>> future;
      {
        GilReleased release;
        future = fleet().run_async(d, prepared.tensors, outputs_on_device);
      }
      wait_interruptibly([&](double slice_s) { return future.wait_for(std::chrono::duration<double>(slice_s)) == std::future_status::ready; });
      GilReleased release;
      outputs = future.get();
    } else {
      GilReleased release;
      outputs = fleet().run(d, prepared.tensors, outputs_on_device);
    }
    return outputs_dict(outputs);
  }
  std::unique_ptr<PyRunFuture> run_async(const py::object& device, const py::dict& inputs, bool outputs_on_device) {
    const Device d = fleet_device(device);
    PreparedInputs prepared = prepare(inputs);
    wait_while_starting(d);
    std::future<std::vector<Tensor>> future;
    {
      GilReleased release;
      future = fleet().run_async(d, prepared.tensors, outputs_on_device);
    }
    return std::make_unique<PyRunFuture>(std::move(future), std::move(prepared));
  }
  py::list devices() {
    py::list out;
    for (const auto& d : fleet().devices()) out.append(d.to_string());
    return out;
  }
  std::string strategy() { return to_string(fleet().strategy()); }
  py::list inputs() {
    const auto specs = fleet().inputs();
    return specs_list(specs);
  }
  py::list outputs() {
    const auto specs = fleet().outputs();
    return specs_list(specs);
  }
  py::dict transfer_counters() {
    const TransferCounters c = fleet().transfer_counters();
    py::dict out;
    out["inputs_host_bytes"] = c.inputs_host_bytes;
    out["inputs_ipc_bytes"] = c.inputs_ipc_bytes;
    out["inputs_staged_bytes"] = c.inputs_staged_bytes;
    out["outputs_host_bytes"] = c.outputs_host_bytes;
    out["outputs_ipc_bytes"] = c.outputs_ipc_bytes;
    out["outputs_staged_bytes"] = c.outputs_staged_bytes;
    out["ipc_opens"] = c.ipc_opens;
    return out;
  }
  py::object timeline() { return parse_json(fleet().timeline().to_json()); }
  std::string trace() { return fleet().timeline().to_chrome_trace(); }
  /// Stops the fleet (a start under way ends: Fleet::shutdown), then says what it left behind.
  void shutdown() {
    if (!fleet_) return;
    std::vector<LeftBehind> left;
    {
      GilReleased release;
      fleet_->shutdown();
      if (!said_left_behind_) left = fleet_->what_is_left();
    }
    said_left_behind_ = true;
    if (left.empty()) return;
    if (!python_running()) {
      for (const auto& l : left) std::fprintf(stderr, "ortfleet %s\n", in_keywords(terminal_text(l.note)).c_str());
      return;
    }
    say_left_behind(left);
  }

 private:
  Fleet& fleet() {
    if (!fleet_) throw Error("this fleet was closed");
    return *fleet_;
  }
  /// A device as run() and ready() take it: an int is a GPU ordinal, except on a fleet without GPUs
  /// (devices="all" on a machine without one), where it counts the fleet's devices, so that a script
  /// written for GPUs (fleet.run(0, ...)) runs on the CPU as it is.
  Device fleet_device(const py::object& device) {
    const auto& devices = fleet().devices();
    const bool has_gpu = std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });  // an int names a CUDA ordinal
    if (has_gpu || !py::isinstance<py::int_>(device) || py::isinstance<py::bool_>(device)) return to_device(device);
    const auto i = device_number(device);
    if (!i || *i < 0 || *i >= static_cast<long long>(devices.size())) {
      throw Error("device " + py::repr(device).cast<std::string>() + " is not part of this fleet; it has: " + to_string(devices) +
                      " (a fleet without GPUs numbers its devices from 0 to " + std::to_string(devices.size() - 1) + ")",
                  "Use one of them, or fleet.devices[0]");
    }
    return devices[static_cast<size_t>(*i)];
  }
  /// Whether no device is pending or starting any more.
  bool settled() {
    const auto status = fleet().status();
    return std::none_of(status.begin(), status.end(),
                        [](const DeviceStatus& d) { return d.state == DeviceState::pending || d.state == DeviceState::starting; });
  }
  /// Waits, interruptibly, while `d` starts (at most until its start timeout, after which run() says so).
  void wait_while_starting(const Device& d) {
    if (!started_at_ || fleet().ready(d)) return;  // before start(), run() says what to do
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - *started_at_).count();
    Fleet& f = fleet();
    const auto device_settled = [&] {
      for (const auto& s : f.status()) {
        if (s.device == d) return s.state != DeviceState::pending && s.state != DeviceState::starting;
      }
      return true;  // not in the fleet: run() says so
    };
    wait_interruptibly(
        [&](double slice_s) {
          if (device_settled()) return true;
          f.wait(slice_s);  // returns early once every device is done, else after the slice
          return device_settled();
        },
        std::max(0.0, start_timeout_s_ - waited_s));
  }
  /// Whether `d`'s session lives in a worker process (its own, or a pool's), once it is ready.
  bool in_worker(const Device& d) {
    const std::string key = d.to_string();
    if (const auto known = in_worker_.find(key); known != in_worker_.end()) return known->second;
    for (const auto& s : fleet().status()) {
      if (s.device == d && s.state == DeviceState::ready) return in_worker_[key] = s.pid != 0 && s.pid != static_cast<int>(::getpid());
    }
    return false;
  }
  PreparedInputs prepare(const py::dict& inputs) {
    PreparedInputs prepared;
    const auto specs = fleet().inputs();
    for (const auto& [name, value] : inputs) add_input(prepared, py::str(name), value, specs);
    return prepared;
  }
  WarmupInputsFile warmup_file_;  // outlives fleet_, whose workers may read it
  std::unique_ptr<Fleet> fleet_;
  double start_timeout_s_ = 0;
  std::optional<std::chrono::steady_clock::time_point> started_at_;
  std::map<std::string, bool> in_worker_;
  bool said_left_behind_ = false;
};

}  // namespace

namespace {
const char* scope_name(SettingScope scope) {
  switch (scope) {
    case SettingScope::fleet: return "fleet";
    case SettingScope::config: return "config";
    case SettingScope::serve: return "serve";
    case SettingScope::output: return "output";
    case SettingScope::environment: return "environment";
    case SettingScope::handed_down: return "handed_down";
    case SettingScope::tests: return "tests";
  }
  return "?";
}

/// The settings table as Python sees it (tests/python/test_settings_table.py walks it): each row's names,
/// and whether it is one of Fleet's keywords.
py::list settings_table() {
  py::list out;
  for (const auto& row : all_settings()) {
    py::dict d;
    d["name"] = row.name;
    d["scope"] = scope_name(row.scope);
    d["flag"] = row.flag != nullptr ? py::object(py::str(row.flag)) : py::object(py::none());
    d["keyword"] = row.keyword != nullptr ? py::object(py::str(row.keyword)) : py::object(py::none());
    d["fleet_keyword"] = is_fleet_keyword(row);
    d["python_default"] = row.python_default != nullptr ? row.python_default : "None";
    d["allowed"] = allowed_values(row.values);
    out.append(d);
  }
  return out;
}
}  // namespace

void bind_fleet(py::module_& m) {
  m.def("_settings", &settings_table, "The settings table (ortfleet/base/settings.hpp): each row's names, as tests walk it");
  py::class_<PyRunFuture>(m, "RunFuture", "A run in flight (Fleet.run_async), like concurrent.futures.Future")
      .def("done", &PyRunFuture::done, "True once the run has finished (or failed)")
      .def("result", &PyRunFuture::result, py::arg("timeout") = py::none(),
           "The outputs, waiting at most `timeout` seconds (TimeoutError then); raises the run's error");

  py::class_<PyFleet> fleet(m, "Fleet", "One ready ONNX Runtime session per device");
  {
    // The signature is the settings table's (fleet_docstring): the keywords it lists, with their types and defaults.
    py::options signature_of_the_table;
    signature_of_the_table.disable_function_signatures();
    static const std::string doc = fleet_docstring();
    fleet.def(py::init([](const std::string& model, const py::object& devices, const py::kwargs& keywords) {
                return std::make_unique<PyFleet>(model, devices, keywords);
              }),
              py::arg("model"), py::arg("devices") = py::none(), doc.c_str());
  }
  fleet
      .def("start", &PyFleet::start, "Begin starting every device; returns at once (the GIL is released)",
           py::return_value_policy::reference_internal)
      .def("wait", &PyFleet::wait, py::arg("timeout") = py::none(),
           "Block until every device is ready or failed, or `timeout` seconds; True when all are ready, False when "
           "one failed or is still starting at the timeout. Ctrl-C interrupts it (KeyboardInterrupt)")
      .def("ready", &PyFleet::ready, py::arg("device"), "Whether that device is ready")
      .def("left_behind", &PyFleet::left_behind,
           "What this start left running for later starts once every device was done, in words: the warm pool it left on "
           "the node, or the model cache entry being made in the background; complete once wait() has returned")
      .def("wait_for_cache_fill", &PyFleet::wait_for_cache_fill, py::arg("timeout"),
           "Wait at most `timeout` seconds for the cache entry this fleet makes itself; what came of it, or None")
      .def("status", &PyFleet::status, "One dict per device, as `ortfleet start --json` prints it")
      .def("run", &PyFleet::run, py::arg("device"), py::arg("inputs"), py::arg("outputs_on_device") = false,
           "Run one inference: inputs maps names to numpy arrays or DLPack tensors (torch, CuPy). device: an int is a GPU "
           "ordinal, except on a fleet without GPUs, where it counts the fleet's devices (0: the CPU); or a device string "
           "('cuda:1', 'cpu'), or one of fleet.devices")
      .def("run_async", &PyFleet::run_async, py::arg("device"), py::arg("inputs"), py::arg("outputs_on_device") = false,
           "Submit one inference and return at once: a future whose result(timeout=None) gives the outputs of run(). "
           "Several runs may be in flight per device, so one thread can keep every device busy")
      .def_property_readonly("devices", &PyFleet::devices)
      .def_property_readonly("strategy", &PyFleet::strategy)
      .def_property_readonly("inputs", &PyFleet::inputs)
      .def_property_readonly("outputs", &PyFleet::outputs)
      .def("transfer_counters", &PyFleet::transfer_counters,
           "Bytes of tensors that crossed to and from worker processes, by how: host shared memory, CUDA IPC (in place), "
           "or staged through host memory; and how many worker allocations were mapped")
      .def("timeline", &PyFleet::timeline, "The start-up timeline (the JSON of `ortfleet start --timeline`), as a dict")
      .def("trace", &PyFleet::trace, "The start-up as a Chrome/Perfetto trace (JSON text)")
      .def("shutdown", &PyFleet::shutdown,
           "Stop every session and worker (a start under way ends: its worker processes are stopped); `with Fleet(...)` calls it on exit")
      .def("__enter__", [](PyFleet& f) -> PyFleet& { return f; }, py::return_value_policy::reference_internal)
      .def("__exit__", [](PyFleet& f, const py::object&, const py::object&, const py::object&) { f.shutdown(); });
}

}  // namespace ortfleet::python
