#pragma once
// The name a mistyped one was meant to be: a command line's flags and commands, ORTFLEET_* variables.
#include <optional>
#include <string>
#include <vector>

namespace ortfleet::detail {

/// The one of `names` that `typed` is a typo of (at most two letters added, dropped, changed or
/// swapped, and fewer than half of them), the nearest first; nothing when none is that close.
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& names);

}  // namespace ortfleet::detail
