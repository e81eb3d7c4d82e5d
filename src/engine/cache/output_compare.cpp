#include "engine/cache/output_compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

namespace {
/// Element i of a float tensor as a double (float16 and bfloat16 widened); nullopt for other types.
std::optional<double> float_at(const Tensor& t, int64_t i) {
  switch (t.type) {
    case ElementType::float32: return static_cast<double>(t.values<float>()[i]);
    case ElementType::float64: return t.values<double>()[i];
    case ElementType::float16:
    case ElementType::bfloat16: {
      const uint16_t h = t.values<uint16_t>()[i];
      uint32_t bits = 0;
      if (t.type == ElementType::bfloat16) {
        bits = static_cast<uint32_t>(h) << 16;
      } else {
        const uint32_t sign = (h & 0x8000u) << 16;
        const uint32_t exponent = (h >> 10) & 0x1f;
        const uint32_t mantissa = h & 0x3ffu;
        if (exponent == 0) {
          const float value = std::ldexp(static_cast<float>(mantissa), -24);
          std::memcpy(&bits, &value, sizeof bits);
          bits |= sign;
        } else if (exponent == 31) {
          bits = sign | 0x7f800000u | (mantissa << 13);
        } else {
          bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
        }
      }
      float value = 0;
      std::memcpy(&value, &bits, sizeof value);
      return static_cast<double>(value);
    }
    default: return std::nullopt;
  }
}
}  // namespace

std::string largest_difference(const Tensor& want, const Tensor& got) {
  const bool floats = want.type == ElementType::float32 || want.type == ElementType::float64 || want.type == ElementType::float16 ||
                      want.type == ElementType::bfloat16;
  if (want.type != got.type || want.shape != got.shape || !floats || want.element_count() == 0) return {};
  double diff = 0;
  double scale = 0;
  for (int64_t i = 0; i < want.element_count(); ++i) {
    const double a = *float_at(want, i);
    const double b = *float_at(got, i);
    if (std::isfinite(a)) scale = std::max(scale, std::abs(a));
    if (std::isfinite(a) && std::isfinite(b)) diff = std::max(diff, std::abs(a - b));
  }
  return fmt::format("max |diff| {:.3g} of {:.3g}", diff, scale);
}

std::string output_difference(const Tensor& want, const Tensor& got, Agreement agreement) {
  const bool other = agreement != Agreement::same_device;
  if (want.type != got.type) return fmt::format("output '{}' is {} instead of {}", want.name, to_string(got.type), to_string(want.type));
  if (want.shape != got.shape) {
    return fmt::format("output '{}' has shape {} instead of {}", want.name, shape_text(got.shape), shape_text(want.shape));
  }
  const int64_t n = want.element_count();
  auto compare = [&](auto value_of, double rtol, double atol) -> std::string {
    double scale = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = std::abs(value_of(want, i));
      if (std::isfinite(v)) scale = std::max(scale, v);
    }
    const double tolerance_floor = atol * (agreement == Agreement::other_shape ? std::max(1e-6, scale) : std::max(1.0, scale));
    for (int64_t i = 0; i < n; ++i) {
      const double a = value_of(want, i);
      const double b = value_of(got, i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (!(std::abs(a - b) <= tolerance_floor + rtol * std::abs(a))) {
        return fmt::format("output '{}' differs at element {}: {} expected, {} given", want.name, i, a, b);
      }
    }
    return {};
  };
  auto widen = [](const Tensor& t, int64_t i) { return *float_at(t, i); };
  switch (want.type) {
    case ElementType::float32: return other ? compare(widen, 1e-2, 1e-2) : compare(widen, 1e-3, 1e-4);
    case ElementType::float64: return other ? compare(widen, 1e-5, 1e-6) : compare(widen, 1e-6, 1e-8);
    case ElementType::float16:
    case ElementType::bfloat16: return other ? compare(widen, 3e-2, 1e-2) : compare(widen, 1e-2, 1e-3);
    default:
      if (want.bytes != got.bytes || (want.bytes > 0 && std::memcmp(want.data, got.data, want.bytes) != 0)) {
        return fmt::format("output '{}' ({}) differs", want.name, to_string(want.type));
      }
      return {};
  }
}

}  // namespace ortfleet::detail
