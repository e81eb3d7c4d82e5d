// ortfleet.Pool and ortfleet.prewarm() (pool.hpp).
#include "pool.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "arguments.hpp"
#include "bindings.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "waiting.hpp"

namespace ortfleet::python {

PyPool::PyPool(const py::object& devices, const std::string& ort_library, bool narrow_workers, size_t max_resident_sessions,
               double start_timeout, bool prime_libraries, bool isolate_new_models) {
  check_environment();  // a bad ORTFLEET_* variable refused (or warned about) before any worker starts
  PoolOptions o;
  o.prime_libraries = prime_libraries;
  o.isolate_new_models = isolate_new_models;
  o.devices = to_devices(devices);
  o.ort_library = ort_library.empty() ? ort_library : checked_text(Setting::ort_library, ort_library);
  o.narrow_workers = narrow_workers;
  o.max_resident_sessions = max_resident_sessions;
  o.start_timeout_s = checked_number(Setting::start_timeout, start_timeout);  // bounded as Fleet's and the command line's
  GilReleased release;
  pool_ = std::make_shared<WorkerPool>(o);
}

bool PyPool::wait(const std::optional<double>& timeout) {
  if (timeout && !(*timeout >= 0)) throw Error("wait() needs a timeout of 0 seconds or more", "Leave it out to wait for every worker");
  WorkerPool& workers = pool();
  bool all_ready = false;
  wait_interruptibly(
      [&](double slice_s) {
        all_ready = workers.wait(slice_s);
        const auto status = workers.status();
        return all_ready || std::none_of(status.begin(), status.end(), [](const PoolWorkerStatus& w) { return w.state == "starting"; });
      },
      timeout);
  return all_ready;
}

py::object PyPool::status() {
  std::string text;
  {
    GilReleased release;
    text = pool().status_json();
  }
  return parse_json(text);
}

size_t PyPool::evict() {
  GilReleased release;
  return pool().evict();
}

py::list PyPool::devices() {
  py::list out;
  for (const auto& d : pool().devices()) out.append(d.to_string());
  return out;
}

void PyPool::close() {
  if (::getpid() != made_in_) {
    static_cast<void>(new std::shared_ptr<WorkerPool>(std::move(pool_)));  // the parent's: never stopped, never destroyed here
    return;
  }
  GilReleased release;
  pool_.reset();  // the workers stop once no fleet uses them either
}

PyPool::~PyPool() {
  if (::getpid() != made_in_) close();
}

const std::shared_ptr<WorkerPool>& PyPool::shared() const {
  if (::getpid() != made_in_) {
    throw Error("this Pool was made in process " + std::to_string(made_in_) + ", and this process (" + std::to_string(::getpid()) +
                    ") is a child forked from it: the pool's workers are the parent's",
                "Make a new ortfleet.Pool in the child (or start children with multiprocessing's 'spawn' or 'forkserver' method)");
  }
  if (!pool_) throw Error("this pool was closed", "Make a new ortfleet.Pool");
  return pool_;
}

std::shared_ptr<PyPool>& prewarmed_pool() {
  static std::shared_ptr<PyPool> pool;
  return pool;
}

void forget_prewarmed_pool() {
  GilReleased release;
  prewarmed_pool().reset();
}

namespace {
/// pool_stop(): true once the server on `path` has stopped, false when there was none (no socket
/// there: never started, or stopped already), so that a second call is no error.
bool stop_pool_server(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return false;
  try {
    call_interruptibly<bool>([path] {
      ortfleet::pool_stop(path);
      return true;
    });
    return true;
  } catch (const Error&) {
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return false;  // another stop took it meanwhile
    throw;
  }
}
}  // namespace

void bind_pool(py::module_& m) {
  py::class_<PyPool, std::shared_ptr<PyPool>>(m, "Pool",
                                              "A warm worker pool: per device a worker process with ONNX Runtime, the CUDA EP, "
                                              "cuInit and its context done, waiting for models")
      .def(py::init<const py::object&, const std::string&, bool, size_t, double, bool, bool>(), py::arg("devices") = py::none(),
           py::kw_only(), py::arg("ort_library") = "", py::arg("narrow_workers") = true, py::arg("max_resident_sessions") = 0,
           py::arg("start_timeout") = PoolOptions{}.start_timeout_s, py::arg("prime_libraries") = true,
           py::arg("isolate_new_models") = true,
           "Starts the workers in the background and returns at once (the GIL is released). isolate_new_models: a model new "
           "to the pool makes its first session in a spare worker of its own, so that a crash inside ONNX Runtime cannot end "
           "the sessions other fleets hold (a second warm worker per device)")
      .def("wait", &PyPool::wait, py::arg("timeout") = py::none(), "Block until every worker is ready or failed; True when all are ready")
      .def("status", &PyPool::status, "Devices, workers, resident sessions and memory")
      .def("evict", &PyPool::evict, "Drop every resident session no fleet holds; how many")
      .def_property_readonly("devices", &PyPool::devices)
      .def("close", &PyPool::close)
      .def("__enter__", [](const std::shared_ptr<PyPool>& p) { return p; })
      .def("__exit__", [](PyPool& p, const py::object&, const py::object&, const py::object&) { p.close(); });

  m.def(
      "prewarm",
      [](const py::object& devices, const std::string& ort_library) {
        auto pool = std::make_shared<PyPool>(devices, ort_library, true, 0, PoolOptions{}.start_timeout_s, true, true);
        prewarmed_pool() = pool;
        return pool;
      },
      py::arg("devices") = py::none(), py::arg("ort_library") = "",
      "Start a warm worker pool in the background and return it at once: call it first in a job, before importing "
      "torch or loading data, and every later Fleet whose devices it has starts on it");
  m.def(
      "pool_status",
      [](const std::optional<std::string>& socket) {
        const std::string path = socket.value_or(default_pool_socket());
        return parse_json(call_interruptibly<std::string>([path] { return ortfleet::pool_status(path); }));
      },
      py::arg("socket") = py::none(),
      "What the pool server on `socket` (default: this node's, where a start leaves its warm pool) holds, as `ortfleet pool "
      "status --json` prints it; raises when none answers there");
  m.def(
      "pool_stop", [](const std::optional<std::string>& socket) { return stop_pool_server(socket.value_or(default_pool_socket())); },
      py::arg("socket") = py::none(),
      "Stop the pool server on `socket` (default: this node's, where a start leaves its warm pool) and its workers: True once it "
      "has stopped, False when none was there (a second call is no error)");
  m.def("default_pool_socket", [] { return default_pool_socket(); }, "Where this node's warm pool listens: $XDG_RUNTIME_DIR/ortfleet/pool.sock");
  m.def("_forget_prewarmed", &forget_prewarmed_pool);
}

}  // namespace ortfleet::python
