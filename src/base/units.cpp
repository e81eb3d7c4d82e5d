#include "ortfleet/base/units.hpp"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>

namespace ortfleet {

std::string duration_text(double ms) {
  // Three significant digits: inference latencies of 1.4 ms and 1.6 ms must not both read "2 ms".
  if (ms < 0.1) return fmt::format("{:.1f} us", ms * 1000);
  if (ms < 10) return fmt::format("{:.2f} ms", ms);
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 60'000) return fmt::format("{:.2f} s", ms / 1000);
  const long long seconds = std::llround(ms / 1000);
  return fmt::format("{} min {} s", seconds / 60, seconds % 60);
}

namespace {
/// One unit a number is written in from `at` on: divided by `scale`, written with `format`.
struct Unit {
  double at;
  double scale;
  const char* format;
};
/// Three significant digits, never an exponent: "1.27", "50.6", "102".
std::string three_digits(double v) { return fmt::format(fmt::runtime(v < 10 ? "{:.2f}" : v < 100 ? "{:.1f}" : "{:.0f}"), v); }

/// `v` in the first of `units` (largest first) it reaches, in three digits, else as a whole number
/// with `plain`.
std::string in_units(double v, std::initializer_list<Unit> units, const char* plain) {
  for (const auto& u : units) {
    if (v >= u.at) return fmt::format(fmt::runtime(u.format), three_digits(v / u.scale));
  }
  return fmt::format(fmt::runtime(plain), v);
}
}  // namespace

std::string bytes_text(uint64_t bytes) {
  return in_units(static_cast<double>(bytes), {{1e9, 1e9, "{} GB"}, {1e6, 1e6, "{} MB"}, {1e3, 1e3, "{} kB"}}, "{:.0f} B");
}

std::string count_text(uint64_t n, const std::string& noun, const std::string& plural) {
  return fmt::format("{} {}", n, n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

std::string magnitude_text(uint64_t n) {
  return in_units(static_cast<double>(n), {{1e9, 1e9, "{} billion"}, {1e6, 1e6, "{} million"}, {1e4, 1e3, "{} thousand"}}, "{:.0f}");
}

}  // namespace ortfleet
