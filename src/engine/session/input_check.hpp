#pragma once
// A run's inputs against the session's, before ONNX Runtime sees them where that is cheap (element
// types, names, ranks, fixed dims), and ONNX Runtime's failure of a run told with what the run was
// given where the model's graph could not combine the sizes of its dynamic dims.
#include <string>
#include <vector>

#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// Throws ortfleet::Error naming the input: a wrong element type ("input 'x' is float64 (double); the
/// model takes float32 (float)", with how to convert it), else what check_shapes finds.
void check_run_inputs(const std::vector<TensorSpec>& inputs, const std::vector<Tensor>& given);

/// ONNX Runtime's exception from running `model_path` as rethrow_ort_error throws it, except where the
/// graph could not combine the sizes it was given (a broadcast, a concatenation, a reshape inside it):
/// then the error names the inputs' shapes given and declared, and the hint the dynamic dims that are
/// not multiples of 32, which models that downsample their input need.
[[noreturn]] void rethrow_run_error(const Ort::Exception& e, const std::string& model_path, const std::vector<TensorSpec>& inputs,
                                    const std::vector<Tensor>& given, const std::string& where);

}  // namespace ortfleet::detail
