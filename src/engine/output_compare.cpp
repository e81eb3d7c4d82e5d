#include "engine/output_compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/shapes.hpp"

namespace ortfleet::detail {

std::string output_difference(const Tensor& want, const Tensor& got) {
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
    const double tolerance_floor = atol * std::max(1.0, scale);
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
  switch (want.type) {
    case ElementType::float32:
      return compare([](const Tensor& t, int64_t i) { return static_cast<double>(t.values<float>()[i]); }, 1e-3, 1e-4);
    case ElementType::float64:
      return compare([](const Tensor& t, int64_t i) { return t.values<double>()[i]; }, 1e-6, 1e-8);
    case ElementType::float16:
    case ElementType::bfloat16: {
      auto widen = [&](const Tensor& t, int64_t i) {
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
      };
      return compare(widen, 1e-2, 1e-3);
    }
    default:
      if (want.bytes != got.bytes || (want.bytes > 0 && std::memcmp(want.data, got.data, want.bytes) != 0)) {
        return fmt::format("output '{}' ({}) differs", want.name, to_string(want.type));
      }
      return {};
  }
}

}  // namespace ortfleet::detail
