#pragma once
// Finding a bench's rows by their label, for its notes and its verdict.
#include <string>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"

namespace ortfleet::detail {

/// The row labelled `label` that ran (BenchRow::ok), or null.
const BenchRow* ran_row(const std::vector<BenchRow>& rows, const std::string& label);

}  // namespace ortfleet::detail
