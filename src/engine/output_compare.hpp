#pragma once
// Whether two runs of a model agree: what a cache entry (an optimised copy of the model) must give
// before it is used, and what a worked-around model must give against the CPU EP.
#include <string>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// Why `got` differs from `want` beyond what an optimised graph may change (fused or reordered
/// floating-point arithmetic: |a - b| <= atol * max(1, max|want|) + rtol * |a|, with rtol/atol 1e-3/1e-4
/// for float32, 1e-2/1e-3 for float16 and bfloat16, 1e-6/1e-8 for float64; NaN matches NaN), or ""
/// when it does not. Integer, boolean and other outputs must be equal byte for byte. Host tensors.
std::string output_difference(const Tensor& want, const Tensor& got);

}  // namespace ortfleet::detail
