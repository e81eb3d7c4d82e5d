#pragma once
// Durations, sizes and counts as a person reads them, one way in every table, note and export of
// ortfleet (the command line's and the library's): three significant digits in the unit that reads
// best, and a noun in the plural only when there is not one.
#include <cstdint>
#include <string>

namespace ortfleet {

/// "85.0 us", "1.40 ms", "11.2 ms", "850 ms", "1.23 s", "2 min 3 s".
std::string duration_text(double ms);

/// "512 B", "50.6 kB", "102 MB", "1.27 GB" (decimal units).
std::string bytes_text(uint64_t bytes);

/// "1 session", "2 sessions", "0 sessions"; `plural` when it is not the noun and an s.
std::string count_text(uint64_t n, const std::string& noun, const std::string& plural = "");

/// A large count in words a person reads at a glance: "9", "12.3 thousand", "25.6 million".
std::string magnitude_text(uint64_t n);

}  // namespace ortfleet
