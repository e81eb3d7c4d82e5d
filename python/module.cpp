// The `ortfleet` Python module's entry: ortfleet's Fleet and diagnostics for Python jobs (PyTorch and
// others), bound file by file (bindings.hpp).
#include "bindings.hpp"
#include "ortfleet/base/error.hpp"

PYBIND11_MODULE(_ortfleet, m) {
  m.doc() = "ortfleet: ONNX Runtime sessions started fast on every GPU, and why start-up is slow";
  static py::exception<ortfleet::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ortfleet::Error& e) {
      error(e.what());
    }
  });

  // In this order: a binding's signature names the classes bound before it (Fleet.run_async a RunFuture).
  ortfleet::python::bind_tensors(m);
  ortfleet::python::bind_fleet(m);
  ortfleet::python::bind_pool(m);
  ortfleet::python::bind_diagnostics(m);
  ortfleet::python::bind_synth(m);
}
