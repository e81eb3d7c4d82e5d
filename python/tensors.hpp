#pragma once
// Tensors between Python and ortfleet: numpy arrays and DLPack tensors (torch, CuPy, JAX) read in
// place as inputs, outputs handed back as numpy arrays or, left on their GPU, as DLPack tensors.
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::python {

class TakenDlpack;

/// Inputs for one run, and the Python objects and DLPack tensors that keep their memory alive.
struct PreparedInputs {
  std::vector<Tensor> tensors;
  std::vector<py::object> keep_alive;
  std::vector<std::unique_ptr<TakenDlpack>> taken;  // handed back to their producers after the run

  // Out of line, where TakenDlpack is complete (tensors.cpp).
  PreparedInputs();
  ~PreparedInputs();
  PreparedInputs(PreparedInputs&&) noexcept;
  PreparedInputs& operator=(PreparedInputs&&) noexcept;
  PreparedInputs(const PreparedInputs&) = delete;
  PreparedInputs& operator=(const PreparedInputs&) = delete;
};

/// Adds input `name`: a numpy array (or what numpy makes an array of the type `specs` declares for
/// it) or a DLPack tensor, read in place.
void add_input(PreparedInputs& out, const std::string& name, py::handle value, const std::vector<TensorSpec>& specs);

/// Outputs by name: numpy arrays over host outputs (no copy), DeviceTensors over GPU ones.
py::dict outputs_dict(const std::vector<Tensor>& outputs);

/// [{"name", "type", "shape"}, ...] of a model's inputs or outputs.
py::list specs_list(const std::vector<TensorSpec>& specs);

}  // namespace ortfleet::python
