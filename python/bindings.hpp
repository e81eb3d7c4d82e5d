#pragma once
// The `ortfleet` Python module, in files by what they bind (module.cpp calls each bind_* in turn):
// tensors.cpp (numpy arrays and DLPack tensors in and out), fleet.cpp (Fleet, RunFuture), pool.cpp
// (Pool, prewarm), diagnostics.cpp (doctor, bench, profile, tune, load_runtime) and synth.cpp (the
// model writers); arguments.cpp turns Python arguments into ortfleet's options. Every call that does
// C++ work releases the GIL, so other Python threads keep running while sessions start and run, and
// every wait answers Ctrl-C at once (waiting.hpp); ortfleet's log goes to Python's logging (log_bridge.hpp).

// Every file of the module sees the same type casters (pybind11 asks it: a cast that differs between
// files breaks the one-definition rule), STL containers and std::optional among them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace ortfleet::python {

void bind_tensors(py::module_& m);
void bind_fleet(py::module_& m);
void bind_pool(py::module_& m);
void bind_diagnostics(py::module_& m);
/// At the interpreter's exit: every bench, profile and tune still running (on a daemon thread) is stopped
/// in order, as Ctrl-C stops one, and waited for (bounded).
void stop_running_diagnostics();
void bind_synth(py::module_& m);

}  // namespace ortfleet::python
