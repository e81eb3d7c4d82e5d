#pragma once
// How many timed rounds a measurement runs within its budget: bench and tune time their cases in
// interleaved rounds and, once the first round shows what one costs, cut the rest to fit.

namespace ortfleet::detail {

/// The rounds to run of the `asked`: all of them when they end within `budget_s` (0: no budget),
/// given that `elapsed_s` went by and the first round took `first_round_s`; else as many as fit, at
/// least `least` (and never more than asked).
int rounds_that_fit(int asked, double budget_s, double elapsed_s, double first_round_s, int least);

}  // namespace ortfleet::detail
