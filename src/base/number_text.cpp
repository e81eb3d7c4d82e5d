#include "ortfleet/base/number_text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

namespace ortfleet {

namespace {
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

/// How many digits start `text` at `at`.
size_t digits_at(std::string_view text, size_t at) {
  size_t n = 0;
  while (at + n < text.size() && is_digit(text[at + n])) ++n;
  return n;
}

/// Whether `text` is [+-]digits[.digits][e[+-]digits] with at least one digit before the exponent.
bool decimal_grammar(std::string_view text) {
  size_t at = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  const size_t whole = digits_at(text, at);
  at += whole;
  size_t fraction = 0;
  if (at < text.size() && text[at] == '.') {
    fraction = digits_at(text, at + 1);
    at += 1 + fraction;
  }
  if (whole + fraction == 0) return false;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
    const size_t exponent = digits_at(text, at);
    if (exponent == 0) return false;
    at += exponent;
  }
  return at == text.size();
}
}  // namespace

std::optional<double> parse_decimal(std::string_view text) {
  if (!decimal_grammar(text)) return std::nullopt;
  // from_chars takes no leading '+'; the grammar above has already refused everything else it would.
  const std::string_view unsigned_text = text[0] == '+' ? text.substr(1) : text;
  double value = 0;
  const auto [end, ec] = std::from_chars(unsigned_text.data(), unsigned_text.data() + unsigned_text.size(), value);
  if (ec != std::errc() || end != unsigned_text.data() + unsigned_text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<long long> parse_whole(std::string_view text) {
  const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (text.size() == sign || digits_at(text, sign) != text.size() - sign) return std::nullopt;
  // from_chars takes a '-' but no '+'.
  const std::string_view number = text[0] == '+' ? text.substr(1) : text;
  long long value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  return value;
}

}  // namespace ortfleet
