// The name a mistyped one was meant to be (closest_name.hpp).
#include "ortfleet/base/closest_name.hpp"

#include <algorithm>

namespace ortfleet::detail {

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& names) {
  // Optimal string alignment distance: a letter added, dropped or changed, or two neighbours swapped.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& name : names) {
    const size_t dist = distance(typed, name);
    // A typo, not another word: at most 2 edits, and fewer than half the letters.
    if (dist > 2 || dist * 2 >= std::max<size_t>(typed.size(), 2)) continue;
    if (!best || dist < best_distance) {
      best = name;
      best_distance = dist;
    }
  }
  return best;
}

}  // namespace ortfleet::detail
