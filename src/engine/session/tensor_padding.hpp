#pragma once
// Padding a tensor up to a bucket's shape and cropping an output back: the leading block of every
// dim is the real data, whatever the dims, in host memory or on the tensor's GPU.
#include <vector>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// `t` in a tensor of `shape` (every dim at least t's), the rest filled with `value` (converted to
/// t's element type), in the memory of `where` (the host, or a GPU: a host tensor's rows are copied
/// up and the padding is set there, so only the real data crosses the bus). `t` itself when the
/// shapes are equal and it already lives there.
Tensor padded(const Tensor& t, const std::vector<int64_t>& shape, double value, const Device& where);

/// `t` copied into `out` (of the same element type, every dim at least t's), the rest of `out` set to
/// `value`: padded() into a buffer the caller keeps (a GPU's, reused from call to call).
void pad_into(const Tensor& t, Tensor& out, double value);

/// The leading block of `t` of `shape` (every dim at most t's), in the memory of `where` (a GPU
/// tensor's block comes down to the host in one 2-D copy). `t` itself when the shapes are equal and
/// it already lives there.
Tensor cropped(const Tensor& t, const std::vector<int64_t>& shape, const Device& where);

/// The leading block of `t` copied into `out`, whose shape it takes (every dim at most t's): cropped()
/// into a buffer the caller keeps (a GPU's, reused from call to call).
void crop_into(const Tensor& t, Tensor& out);

/// The row copies that move the leading block common to `from` and `to` between tensors of those
/// shapes (elements of `element_bytes`): each copies `height` rows of `width` bytes, starting at
/// `from_offset` / `to_offset`, rows `from_pitch` / `to_pitch` bytes apart. The dims after the
/// innermost one that differs are one row; the dim before it is a copy's rows; the others loop.
struct RowCopy {
  size_t from_offset = 0;
  size_t to_offset = 0;
  size_t from_pitch = 0;
  size_t to_pitch = 0;
  size_t width = 0;
  size_t height = 0;
};
std::vector<RowCopy> block_copies(const std::vector<int64_t>& from, const std::vector<int64_t>& to, size_t element_bytes);

}  // namespace ortfleet::detail
