#include "engine/session/tensor_padding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/engine/device_tensor.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

namespace {

/// `value` as one element of `type`, in its bytes.
template <typename T>
T checked_value(double value, ElementType type) {
  if (std::trunc(value) != value || value < static_cast<double>(std::numeric_limits<T>::lowest()) ||
      value > static_cast<double>(std::numeric_limits<T>::max())) {
    throw Error(fmt::format("the pad value {} is not a {} value", value, to_string(type)), "Give a pad value the input's element type can hold");
  }
  return static_cast<T>(value);
}

std::vector<std::byte> element_bytes(ElementType type, double value) {
  std::vector<std::byte> out(element_size(type));
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  switch (type) {
    case ElementType::float32: put(static_cast<float>(value)); break;
    case ElementType::float64: put(value); break;
    case ElementType::float16: put(float_to_half(static_cast<float>(value))); break;
    case ElementType::bfloat16: put(float_to_bfloat16(static_cast<float>(value))); break;
    case ElementType::int8: put(checked_value<int8_t>(value, type)); break;
    case ElementType::uint8: put(checked_value<uint8_t>(value, type)); break;
    case ElementType::boolean: put(static_cast<uint8_t>(value != 0)); break;
    case ElementType::int16: put(checked_value<int16_t>(value, type)); break;
    case ElementType::uint16: put(checked_value<uint16_t>(value, type)); break;
    case ElementType::int32: put(checked_value<int32_t>(value, type)); break;
    case ElementType::uint32: put(checked_value<uint32_t>(value, type)); break;
    // A double holds every 32-bit integer but not every 64-bit one: 64-bit pad values (token ids) are
    // taken within the 32-bit range.
    case ElementType::int64: put(checked_value<int32_t>(value, type) + int64_t{0}); break;
    case ElementType::uint64: put(static_cast<uint64_t>(checked_value<uint32_t>(value, type))); break;
    default: throw Error("cannot pad a tensor of " + to_string(type) + " elements", "Bucket only numeric inputs");
  }
  return out;
}

void copy_block(const Tensor& from, Tensor& to) {
  const auto copies = block_copies(from.shape, to.shape, element_size(from.type));
  const auto* source = static_cast<const std::byte*>(from.data);
  auto* target = static_cast<std::byte*>(to.data);
  for (const auto& c : copies) {
    if (from.on_gpu() || to.on_gpu()) {
      const Device& device = from.on_gpu() ? from.device : to.device;
      device_memory(device).copy_rows(device, target + c.to_offset, to.on_gpu(), c.to_pitch, source + c.from_offset, from.on_gpu(), c.from_pitch,
                                      c.width, c.height);
      continue;
    }
    for (size_t row = 0; row < c.height; ++row) {
      std::memcpy(target + c.to_offset + row * c.to_pitch, source + c.from_offset + row * c.from_pitch, c.width);
    }
  }
}

Tensor empty_like(const Tensor& t, const std::vector<int64_t>& shape, const Device& where, const char* what) {
  const size_t bytes = checked_bytes(shape, t.type, std::string(what) + " '" + t.name + "'");
  if (where.kind != Device::Kind::cpu) return allocate_on_device(t.name, t.type, shape, bytes, where);
  return Tensor::host_allocate(t.name, t.type, shape);  // every byte is written: padded or copied
}

}  // namespace

std::vector<RowCopy> block_copies(const std::vector<int64_t>& from, const std::vector<int64_t>& to, size_t element_bytes) {
  if (from.size() != to.size()) throw Error("cannot copy a block between ranks " + std::to_string(from.size()) + " and " + std::to_string(to.size()));
  const size_t rank = from.size();
  std::vector<int64_t> block(rank);
  for (size_t i = 0; i < rank; ++i) block[i] = std::min(from[i], to[i]);
  if (std::any_of(block.begin(), block.end(), [](int64_t d) { return d <= 0; })) return {};
  // Strides in bytes of both layouts.
  std::vector<size_t> from_stride(rank + 1, element_bytes);
  std::vector<size_t> to_stride(rank + 1, element_bytes);
  for (size_t i = rank; i-- > 0;) {
    from_stride[i] = from_stride[i + 1] * static_cast<size_t>(from[i]);
    to_stride[i] = to_stride[i + 1] * static_cast<size_t>(to[i]);
  }
  size_t k = rank;  // the innermost dim whose sizes differ
  for (size_t i = rank; i-- > 0;) {
    if (from[i] != to[i]) {
      k = i;
      break;
    }
  }
  if (k == rank) return {RowCopy{0, 0, from_stride[0], to_stride[0], from_stride[0], 1}};
  RowCopy row;
  row.width = static_cast<size_t>(block[k]) * from_stride[k + 1];
  row.from_pitch = k == 0 ? row.width : from_stride[k];
  row.to_pitch = k == 0 ? row.width : to_stride[k];
  // Rows are the dims before k; those from `first` to k-1 are evenly spaced in both layouts (every
  // dim between them is the same size in both), so one copy takes them all: padding the width of
  // [8, 256, 60, 60] is one copy of 122,880 rows, not 2,048 copies of 60.
  size_t first = k;
  row.height = 1;
  while (first > 0 && (first == k || from[first] == to[first])) {
    --first;
    row.height *= static_cast<size_t>(block[first]);
  }
  const size_t loops = first;  // dims 0 .. first-1 loop
  std::vector<int64_t> index(loops, 0);
  std::vector<RowCopy> out;
  while (true) {
    RowCopy c = row;
    for (size_t i = 0; i < loops; ++i) {
      c.from_offset += static_cast<size_t>(index[i]) * from_stride[i + 1];
      c.to_offset += static_cast<size_t>(index[i]) * to_stride[i + 1];
    }
    out.push_back(c);
    size_t i = loops;
    while (i > 0 && ++index[i - 1] == block[i - 1]) index[--i] = 0;
    if (i == 0) break;
  }
  return out;
}

Tensor padded(const Tensor& t, const std::vector<int64_t>& shape, double value, const Device& where) {
  if (shape == t.shape && t.device == where) return t;
  Tensor out = empty_like(t, shape, where, "input");
  pad_into(t, out, value);
  return out;
}

void pad_into(const Tensor& t, Tensor& out, double value) {
  if (out.type != t.type) throw Error("cannot pad a tensor of " + to_string(t.type) + " into one of " + to_string(out.type));
  const std::vector<std::byte> pattern = element_bytes(t.type, value);
  const bool zero = std::all_of(pattern.begin(), pattern.end(), [](std::byte b) { return b == std::byte{0}; });
  const size_t count = out.bytes / pattern.size();
  if (out.on_gpu()) {
    device_memory(out.device).fill(out.device, out.data, count, pattern.data(), pattern.size());
  } else if (zero) {
    std::memset(out.data, 0, out.bytes);
  } else {
    auto* bytes = static_cast<std::byte*>(out.data);
    for (size_t i = 0; i < count; ++i) std::memcpy(bytes + i * pattern.size(), pattern.data(), pattern.size());
  }
  copy_block(t, out);
}

Tensor cropped(const Tensor& t, const std::vector<int64_t>& shape, const Device& where) {
  if (shape == t.shape && t.device == where) return t;
  Tensor out = empty_like(t, shape, where, "output");
  copy_block(t, out);
  return out;
}

void crop_into(const Tensor& t, Tensor& out) {
  if (out.type != t.type) throw Error("cannot crop a tensor of " + to_string(t.type) + " into one of " + to_string(out.type));
  copy_block(t, out);
}

}  // namespace ortfleet::detail
