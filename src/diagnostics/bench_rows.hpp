#pragma once
// A bench's rows: their times summed up, and found by their label, for its notes and its verdict.
#include <string>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"

namespace ortfleet::detail {

/// Fills min, median, max, mean and σ of `row` from its wall_ms (every row of every bench, the next
/// job's rows too, is summed up the same way).
void fill_times(BenchRow& row);

/// Adds a timed round to `row`: its wall time, and its report, kept as the row's median_report when it is
/// the nearest yet to the median of the rounds so far (the one whose timeline the row shows).
void add_timed_round(BenchRow& row, const StartReport& start);

/// The row labelled `label` that ran (BenchRow::ok), or null.
const BenchRow* ran_row(const std::vector<BenchRow>& rows, const std::string& label);

}  // namespace ortfleet::detail
