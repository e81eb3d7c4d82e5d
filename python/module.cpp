// The `ortfleet` Python module's entry: ortfleet's Fleet and diagnostics for Python jobs (PyTorch and
// others), bound file by file (bindings.hpp).
#include "bindings.hpp"
#include "log_bridge.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "pool.hpp"
#include "setting_words.hpp"

PYBIND11_MODULE(_ortfleet, m) {
  m.doc() = "ortfleet: ONNX Runtime sessions started fast on every GPU, and why start-up is slow";
  static py::exception<ortfleet::Error> error(m, "Error", PyExc_RuntimeError);
  error.attr("__module__") = "ortfleet";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ortfleet::Error& e) {
      // Decoded leniently: a message quoting a file name or a value that is not UTF-8 (a model given
      // as bytes) made PyErr_SetString fail, and the Error was raised with no message at all.
      std::string text = ortfleet::python::in_keywords(e.what());
      if (text.empty()) text = "an ortfleet call failed without saying why; please report it, with the call that raised this";
      py::object message = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace"));
      if (!message) throw py::error_already_set();
      PyErr_SetObject(error.ptr(), message.ptr());
    }
  });
  // A warning category of its own, so that a job may silence it, or make it an error in its tests
  // (warnings.filterwarnings("ignore", category=ortfleet.LeftBehindWarning)).
  m.attr("LeftBehindWarning") = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "ortfleet.LeftBehindWarning",
      "A process this job started keeps running after it: the warm worker pool a start leaves on the node for the next "
      "job (Fleet(..., warm_pool_idle=0) or pool=False leaves none; ortfleet.pool_stop() stops it)",
      PyExc_UserWarning, nullptr));
  ortfleet::python::install_log_bridge();

  // In this order: a binding's signature names the classes bound before it (Fleet.run_async a RunFuture).
  ortfleet::python::bind_tensors(m);
  ortfleet::python::bind_fleet(m);
  ortfleet::python::bind_pool(m);
  ortfleet::python::bind_diagnostics(m);
  ortfleet::python::bind_synth(m);

  // At exit, before the interpreter tears the module down: the diagnostics still running stop in order,
  // the prewarmed pool's workers stop, and the log records still queued are handed on.
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    ortfleet::python::stop_running_diagnostics();
    ortfleet::python::forget_prewarmed_pool();
    ortfleet::python::forward_log_records();
    if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  }));
}
