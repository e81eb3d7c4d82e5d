#pragma once
// The CUDA driver's start in a fleet's start: cuInit and the primary contexts each worker process
// makes, read from the start's timeline (cuda.init and cuda.context per worker), how they overlapped,
// and what share of the fleet's time passed with a worker inside them. bench and profile say it for
// a start on more than one GPU; only a process that keeps its CUDA context (a warm pool) avoids it.
#include <cstdint>
#include <string>
#include <vector>

#include "ortfleet/engine/timeline.hpp"

namespace ortfleet {

/// One process's part of the driver's start: its cuInit and its contexts.
struct DriverWorker {
  int pid = 0;
  std::string lanes;      ///< whose: "cuda:0", or "process, cuda:0, cuda:1" for a start in one process
  double init_ms = 0;     ///< cuInit in this process (0 where it ran inside another phase)
  double context_ms = 0;  ///< its contexts, summed
  int contexts = 0;
  double begin_ms = 0;    ///< since exec: its first cuInit or context began
  double end_ms = 0;      ///< since exec: its last context was made
  double driver_ms() const { return init_ms + context_ms; }
};

struct DriverStart {
  std::vector<DriverWorker> workers;  ///< by when they began
  double total_ms = 0;       ///< every worker's cuInit and contexts, summed
  double span_ms = 0;        ///< the union of their intervals: the time some worker was inside the driver's start
  double fleet_ms = 0;       ///< exec until every device was ready
  double last_context_ms = 0;  ///< since exec: when the last context was made
  int gpus = 0;              ///< contexts made, over all workers
  bool measured() const { return !workers.empty(); }
  /// total / span: 1 when the workers' driver starts ran one after another, the worker count when all at once.
  double overlap() const { return span_ms > 0 ? total_ms / span_ms : 0; }
  /// Of the fleet's time, the part some worker spent inside the driver's start.
  double share() const { return fleet_ms > 0 ? span_ms / fleet_ms : 0; }
  /// What it cost and what avoids it, in words ("" when nothing was measured).
  std::string summary() const;
  std::string to_json() const;
};

/// The driver's start of the start whose `timeline` ran from `spawn_ns` (exec) to `ready_ns`: every
/// cuda.init and cuda.context event, grouped by the process that ran it. Empty without such events.
DriverStart driver_start_of(const Timeline& timeline, int64_t spawn_ns, int64_t ready_ns);

}  // namespace ortfleet
