#pragma once
// Whether two runs of a model agree: what a cache entry (an optimised copy of the model) must give
// before it is used, and what a worked-around model must give against the CPU EP.
#include <string>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// How far two runs may drift apart: the same device running an optimised copy of a graph (fused or
/// reordered floating-point arithmetic), or another device (a GPU's kernels, TF32 convolutions,
/// against the CPU EP's); `other_shape`: a call padded to another shape and cropped back, which may
/// drift as another device's run does, relative to the output's own scale even where it is far
/// below 1 (a detector's probabilities near 0 on made-up inputs move by as much as they are).
enum class Agreement { same_device, other_device, other_shape };

/// Why `got` differs from `want` beyond what `agreement` allows (|a - b| <= atol * max(1, max|want|)
/// + rtol * |a|, other_shape: atol * max(1e-6, max|want|) + rtol * |a| with another device's rtol and atol; same device: rtol/atol 1e-3/1e-4 for float32, 1e-2/1e-3 for float16 and bfloat16,
/// 1e-6/1e-8 for float64; another device: 1e-2/1e-2 for float32, 3e-2/1e-2 for float16 and
/// bfloat16, 1e-5/1e-6 for float64; NaN matches NaN), or "" when it does not. Integer, boolean and
/// other outputs must be equal byte for byte. Host tensors.
std::string output_difference(const Tensor& want, const Tensor& got, Agreement agreement = Agreement::same_device);

/// The largest |want - got| of two float tensors of one shape, and max |want| (its scale): "max |diff|
/// 0.0027 of 0.82". "" for other types or shapes.
std::string largest_difference(const Tensor& want, const Tensor& got);

}  // namespace ortfleet::detail
