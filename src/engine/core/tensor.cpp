#include "ortfleet/engine/tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "ortfleet/base/error.hpp"

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

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

std::string shape_text(const TensorSpec& spec) {
  std::string out = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    const std::string dim = spec.shape[i] >= 0                                       ? std::to_string(spec.shape[i])
                            : i < spec.dim_names.size() && !spec.dim_names[i].empty() ? spec.dim_names[i]
                                                                                      : "?";
    out += (i ? ", " : "") + dim;
  }
  return out + "]";
}

int64_t checked_element_count(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0) throw Error(what + " has a negative dim in " + shape_text(shape), "Give every dim a size of 0 or more");
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error(what + " of shape " + shape_text(shape) + " has more elements than memory can hold",
                  "Check the shape; a dynamic dim may need a smaller value");
    }
  }
  return n;
}

size_t checked_bytes(const std::vector<int64_t>& shape, ElementType type, const std::string& what) {
  const int64_t n = checked_element_count(shape, what);
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n), element_size(type), &bytes) ||
      bytes > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(what + " of shape " + shape_text(shape) + " is larger than memory can hold", "Check the shape");
  }
  return bytes;
}

int64_t Tensor::element_count() const { return checked_element_count(shape, "tensor '" + name + "'"); }

Tensor Tensor::host_copy(std::string name, ElementType type, std::vector<int64_t> shape, const void* src) {
  Tensor t = host_allocate(std::move(name), type, std::move(shape));
  if (t.bytes == 0) return t;
  if (src != nullptr) std::memcpy(t.data, src, t.bytes);
  else std::memset(t.data, 0, t.bytes);
  return t;
}

Tensor Tensor::host_allocate(std::string name, ElementType type, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  t.bytes = checked_bytes(t.shape, type, "tensor '" + t.name + "'");
  std::shared_ptr<std::byte[]> storage(new std::byte[std::max<size_t>(t.bytes, 1)]);  // not zeroed: the caller writes it
  t.data = storage.get();
  t.owner = std::move(storage);
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

uint16_t float_to_half(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0));  // inf, NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds beyond 65504: inf
  if (magnitude < 0x38800000u) {  // a subnormal half (or zero)
    float scaled = 0;
    const uint32_t m = magnitude;
    std::memcpy(&scaled, &m, sizeof scaled);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled * 16777216.0f)));  // 2^24
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u) - (112u << 23);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

uint16_t float_to_bfloat16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN stays NaN
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

namespace {
/// Fills `t` with values in `range` (integers rounded into it), or the defaults when there is none.
void fill_random(Tensor& t, const std::optional<ValueRange>& range, std::mt19937_64& rng) {
  const int64_t n = t.element_count();
  const double lo = range ? range->lo : -1.0;
  const double hi = range ? range->hi : 1.0;
  auto real = [&] {
    if (lo == hi) return lo;
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  const auto int_lo = static_cast<int64_t>(std::ceil(range ? range->lo : 0.0));
  const auto int_hi = std::max(int_lo, static_cast<int64_t>(std::floor(range ? range->hi : 1.0)));
  std::uniform_int_distribution<int64_t> ints(int_lo, int_hi);
  auto fill = [&]<typename T>(T* values, auto draw) {
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<T>(draw());
  };
  switch (t.type) {
    case ElementType::float32: fill(t.values<float>(), real); break;
    case ElementType::float64: fill(t.values<double>(), real); break;
    case ElementType::float16:
    case ElementType::bfloat16:
      if (!range) {
        // Small random half-precision values: a zero exponent field keeps them finite (subnormal).
        for (int64_t i = 0; i < n; ++i) t.values<uint16_t>()[i] = static_cast<uint16_t>(rng() & 0x83ff);
      } else if (t.type == ElementType::float16) {
        fill(t.values<uint16_t>(), [&] { return float_to_half(static_cast<float>(real())); });
      } else {
        fill(t.values<uint16_t>(), [&] { return float_to_bfloat16(static_cast<float>(real())); });
      }
      break;
    case ElementType::int64: fill(t.values<int64_t>(), [&] { return ints(rng); }); break;
    case ElementType::int32: fill(t.values<int32_t>(), [&] { return ints(rng); }); break;
    case ElementType::int16: fill(t.values<int16_t>(), [&] { return ints(rng); }); break;
    case ElementType::int8: fill(t.values<int8_t>(), [&] { return ints(rng); }); break;
    case ElementType::uint64: fill(t.values<uint64_t>(), [&] { return ints(rng); }); break;
    case ElementType::uint32: fill(t.values<uint32_t>(), [&] { return ints(rng); }); break;
    case ElementType::uint16: fill(t.values<uint16_t>(), [&] { return ints(rng); }); break;
    case ElementType::uint8:
    case ElementType::boolean: fill(t.values<uint8_t>(), [&] { return ints(rng); }); break;
    default: break;
  }
}
}  // namespace

std::vector<Tensor> random_inputs(const std::vector<TensorSpec>& specs, uint64_t seed, int64_t dynamic_dim,
                                  const std::map<std::string, ValueRange>& ranges) {
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
    const auto range = ranges.find(spec.name);
    fill_random(t, range == ranges.end() ? std::nullopt : std::optional<ValueRange>(range->second), rng);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ortfleet
