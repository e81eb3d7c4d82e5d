#pragma once
// Numbers as a person types them, read one way everywhere (flags, environment variables, the
// warm-up and padding values): "300", "-2", "0.5", "1e3". Hexadecimal ("0x10"), "inf", "nan",
// spaces around it, a trailing unit or anything after the number is not a number: strtod and stod
// read "0x10" as 16 and "12abc" as 12, and a value read differently from how it was meant is worse
// than one refused.
#include <optional>
#include <string_view>

namespace ortfleet {

/// `text` as a finite decimal number ([+-]digits[.digits][e[+-]digits], or [+-].digits...), or
/// nullopt when it is anything else.
std::optional<double> parse_decimal(std::string_view text);

/// `text` as a whole decimal number ([+-]digits) that fits a long long, or nullopt.
std::optional<long long> parse_whole(std::string_view text);

}  // namespace ortfleet
