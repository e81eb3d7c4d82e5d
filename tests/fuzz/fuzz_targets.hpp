#pragma once
// The parsers ortfleet owns, as fuzz targets: each takes arbitrary bytes and must either return or
// throw ortfleet::Error (never crash, never throw another exception type). Shared by the bounded
// mutation test (fuzz_mutation_test.cpp, a ctest) and the libFuzzer targets (fuzz_libfuzzer.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ortfleet::fuzz {

struct Target {
  const char* name;
  void (*parse)(std::string_view bytes);     ///< the parser under test
  std::vector<std::string> (*seeds)();       ///< valid inputs the mutations start from
};

/// Every target: pool_request, config, plan, status, error, specs, tensors, start_report, timeline, ort_profile,
/// ort_log, ort_error_text, ort_format, model.
const std::vector<Target>& targets();
const Target& target(std::string_view name);  ///< throws std::invalid_argument for an unknown name

/// Runs one input through `t`: returns normally when the parser returned or threw ortfleet::Error;
/// lets anything else escape (the caller reports it as a finding).
void run_one(const Target& t, std::string_view bytes);

}  // namespace ortfleet::fuzz
