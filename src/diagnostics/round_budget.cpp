// How many timed rounds fit a budget (round_budget.hpp).
#include "diagnostics/round_budget.hpp"

#include <algorithm>

namespace ortfleet::detail {

int rounds_that_fit(int asked, double budget_s, double elapsed_s, double first_round_s, int least) {
  const double end_s = elapsed_s + first_round_s * (asked - 1);
  if (budget_s <= 0 || end_s <= budget_s || asked <= 1) return asked;
  const int fit = static_cast<int>((budget_s - elapsed_s) / std::max(first_round_s, 1e-3)) + 1;
  return std::clamp(fit, std::min(least, asked), asked);
}

}  // namespace ortfleet::detail
