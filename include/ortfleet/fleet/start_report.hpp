#pragma once
// What one start of a fleet looked like from the process that ran it: what `ortfleet start
// --ready-line` prints and `ortfleet bench`, `profile` and `tune` read (the Python anchors print the
// same shape).
#include <cstdint>
#include <string>
#include <vector>

#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/fleet/fleet.hpp"

namespace ortfleet {

struct StartReport {
  std::string model;
  std::string strategy;
  std::string strategy_reason;  ///< Fleet::strategy_reason()
  StrategyWhy strategy_why = StrategyWhy::as_asked;  ///< Fleet::strategy_why(): what a reader goes by
  std::string devices_reason;   ///< Fleet::devices_reason(): why these devices, under Slurm
  std::vector<DeviceStatus> devices;
  int64_t spawn_ns = 0;  ///< when the process was spawned ($ORTFLEET_SPAWN_NS), else main()
  int64_t main_ns = 0;   ///< when main() began
  int64_t ready_ns = 0;  ///< when the last device became ready (or failed)
  bool all_ready = false;
  Timeline timeline;

  double wall_ms() const { return static_cast<double>(ready_ns - spawn_ns) / 1e6; }
  std::string to_json() const;
  /// Parses a report; throws ortfleet::Error naming what is malformed.
  static StartReport from_json(const std::string& text);
};

/// The report of a started fleet; `main_ns` is when the process's main() began.
StartReport make_start_report(const Fleet& fleet, const std::string& model, int64_t main_ns);

}  // namespace ortfleet
