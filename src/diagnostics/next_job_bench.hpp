#pragma once
// The next job on a node, as bench rows: jobs run one after another as a user's script runs them, each a
// fresh `ortfleet start` with the default strategy (auto), in a runtime folder and model cache of their
// own: the first job (an empty cache; it leaves a warm pool and hands its workers to it as it ends), the
// next job right after it, and where the pool's workers park (GPUs with the driver's checkpoint API) a
// job once the idle pool has parked with the model resident, and one after `pool evict` (a new session
// on a parked pool). Every figure here depends on the pool the first job left: they are reported beside
// the cold rows, never as the fastest cold start.
#include <string>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"

namespace ortfleet::detail {

struct NextJobRows {
  std::vector<BenchRow> rows;
  std::vector<std::string> skipped;  ///< rows not run, and why
};

/// `rounds` timed rounds (after o.warmup_rounds untimed ones), each with its own runtime folder, cache and
/// pool, stopped at the round's end.
NextJobRows run_next_job_rows(const BenchOptions& o, const std::string& ortfleet, int rounds);

/// "the next job right after the first: 0.31x ...": the next-job rows against the first job and the
/// plain start (onnxruntime's Python API on one device, else the fleet without the cache).
std::vector<std::string> next_job_notes(const std::vector<BenchRow>& rows);

}  // namespace ortfleet::detail
