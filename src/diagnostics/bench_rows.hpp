#pragma once
// A bench's rows: their times summed up, and found by their label, for its notes and its verdict.
#include <string>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"

namespace ortfleet::detail {

/// Fills min, median, max, mean and σ of `row` from its wall_ms (every row of every bench, the next
/// job's rows too, is summed up the same way).
void fill_times(BenchRow& row);

/// The row labelled `label` that ran (BenchRow::ok), or null.
const BenchRow* ran_row(const std::vector<BenchRow>& rows, const std::string& label);

}  // namespace ortfleet::detail
