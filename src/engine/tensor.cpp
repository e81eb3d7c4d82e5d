#include "ortfleet/engine/tensor.hpp"

#include <cstring>
#include <random>

#include "engine/cuda_driver.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/shapes.hpp"

namespace ortfleet {

const std::vector<ElementTypeInfo>& element_types() {
  static const std::vector<ElementTypeInfo> table = {
      {ElementType::float32, "float32", 4, 'f', 2}, {ElementType::float16, "float16", 2, 'f', 2},
      {ElementType::float64, "float64", 8, 'f', 2}, {ElementType::bfloat16, "bfloat16", 2, 0, 4},
      {ElementType::int64, "int64", 8, 'i', 0},     {ElementType::int32, "int32", 4, 'i', 0},
      {ElementType::int16, "int16", 2, 'i', 0},     {ElementType::int8, "int8", 1, 'i', 0},
      {ElementType::uint64, "uint64", 8, 'u', 1},   {ElementType::uint32, "uint32", 4, 'u', 1},
      {ElementType::uint16, "uint16", 2, 'u', 1},   {ElementType::uint8, "uint8", 1, 'u', 1},
      {ElementType::boolean, "bool", 1, 'b', 6},    {ElementType::string, "string", 0, 0, -1}};
  return table;
}

const ElementTypeInfo* element_type_info(ElementType type) {
  for (const auto& row : element_types()) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

size_t element_size(ElementType type) {
  const auto* info = element_type_info(type);
  return info != nullptr ? info->size : 0;
}

std::string to_string(ElementType type) {
  const auto* info = element_type_info(type);
  return info != nullptr ? info->name : "undefined";
}

ElementType parse_element_type(const std::string& name) {
  for (const auto& row : element_types()) {
    if (name == row.name) return row.type;
  }
  throw Error("unknown element type '" + name + "'", "Use float32, float16, int64, int32, uint8, bool, ...");
}

int64_t Tensor::element_count() const { return checked_element_count(shape, "tensor '" + name + "'"); }

Tensor Tensor::host_copy(std::string name, ElementType type, std::vector<int64_t> shape, const void* src) {
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  t.bytes = checked_bytes(t.shape, type, "tensor '" + t.name + "'");
  auto storage = std::make_shared<std::vector<std::byte>>(t.bytes);
  if (src != nullptr && t.bytes > 0) std::memcpy(storage->data(), src, t.bytes);
  t.data = storage->data();
  t.owner = storage;
  return t;
}

Tensor Tensor::borrow(std::string name, ElementType type, std::vector<int64_t> shape, void* data, Device device) {
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  t.bytes = checked_bytes(t.shape, type, "tensor '" + t.name + "'");
  t.data = data;
  t.device = device;
  return t;
}

Tensor Tensor::allocate_on_gpu(std::string name, ElementType type, std::vector<int64_t> shape, size_t bytes, const Device& device) {
  const int ordinal = cuda_ordinal(device);
  void* memory = detail::CudaDriver::instance().allocate(ordinal, bytes);
  Tensor t = borrow(std::move(name), type, std::move(shape), memory, device);
  t.bytes = bytes;
  t.owner = std::shared_ptr<void>(memory, [ordinal](void* p) { detail::CudaDriver::instance().release(ordinal, p); });
  return t;
}

Tensor Tensor::copy_to_gpu(const Tensor& host, const Device& device) {
  if (host.on_gpu()) throw Error("tensor '" + host.name + "' is on " + host.device.to_string() + ", not in host memory", {}, device.to_string());
  Tensor t = allocate_on_gpu(host.name, host.type, host.shape, host.bytes, device);
  detail::CudaDriver::instance().copy_to_device(cuda_ordinal(device), t.data, host.data, host.bytes);
  return t;
}

Tensor Tensor::copy_to_host(const Tensor& on_gpu) {
  if (!on_gpu.on_gpu()) throw Error("tensor '" + on_gpu.name + "' is in host memory, not on a GPU");
  Tensor t = host_copy(on_gpu.name, on_gpu.type, on_gpu.shape, nullptr);
  detail::CudaDriver::instance().copy_to_host(cuda_ordinal(on_gpu.device), t.data, on_gpu.data, on_gpu.bytes);
  return t;
}

std::vector<Tensor> random_inputs(const std::vector<TensorSpec>& specs, uint64_t seed, int64_t dynamic_dim,
                                  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>>& int_ranges) {
  std::vector<Tensor> out;
  std::mt19937_64 rng(seed);
  for (const auto& spec : specs) {
    if (element_size(spec.type) == 0) {
      throw Error("input '" + spec.name + "' has type " + to_string(spec.type) + ", which warm-up cannot generate",
                  "Give the session real inputs instead of generated ones");
    }
    std::vector<int64_t> shape = spec.shape;
    for (auto& d : shape) {
      if (d < 0) d = dynamic_dim;
    }
    Tensor t = Tensor::host_copy(spec.name, spec.type, shape, nullptr);
    const int64_t n = t.element_count();
    std::pair<int64_t, int64_t> range{0, 1};
    for (const auto& [name, r] : int_ranges) {
      if (name == spec.name) range = r;
    }
    std::uniform_int_distribution<int64_t> ints(range.first, range.second);
    std::uniform_real_distribution<float> reals(-1.0f, 1.0f);
    switch (spec.type) {
      case ElementType::float32:
        for (int64_t i = 0; i < n; ++i) t.values<float>()[i] = reals(rng);
        break;
      case ElementType::float64:
        for (int64_t i = 0; i < n; ++i) t.values<double>()[i] = reals(rng);
        break;
      case ElementType::int64:
        for (int64_t i = 0; i < n; ++i) t.values<int64_t>()[i] = ints(rng);
        break;
      case ElementType::int32:
        for (int64_t i = 0; i < n; ++i) t.values<int32_t>()[i] = static_cast<int32_t>(ints(rng));
        break;
      case ElementType::boolean:
      case ElementType::uint8:
      case ElementType::int8:
        for (int64_t i = 0; i < n; ++i) t.values<uint8_t>()[i] = static_cast<uint8_t>(ints(rng));
        break;
      case ElementType::float16:
      case ElementType::bfloat16:
        // Small random half-precision values: a zero exponent field keeps them finite (subnormal).
        for (int64_t i = 0; i < n; ++i) t.values<uint16_t>()[i] = static_cast<uint16_t>(rng() & 0x83ff);
        break;
      default:
        for (size_t i = 0; i < t.bytes; ++i) static_cast<uint8_t*>(t.data)[i] = static_cast<uint8_t>(ints(rng));
        break;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ortfleet
