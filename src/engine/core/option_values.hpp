#pragma once
// What the readers of option values share (option_values.cpp, config_file.cpp): case folding, so that
// "heuristic" is HEURISTIC and "lazy" is LAZY.
#include <string>

namespace ortfleet::detail {

/// `s` in upper case (ASCII letters).
std::string upper(std::string s);
/// `s` in lower case (ASCII letters).
std::string lower(std::string s);

}  // namespace ortfleet::detail
