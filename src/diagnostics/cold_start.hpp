#pragma once
// One cold start, timed from outside: `ortfleet start --ready-line` (or a program that prints the same
// report line, such as the Python anchors) run as a fresh process, its report read back. bench,
// profile and tune all measure start-up this way: a second start inside one process reuses loaded
// libraries and CUDA contexts and looks several times faster than it is.
// The run config travels to the child as one config file (RunConfig::save, `start --config`), never as
// flags composed again from it.
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/fleet/start_report.hpp"

namespace ortfleet::detail {

struct ColdStartRequest {
  std::string model;
  std::vector<Device> devices;
  std::string strategy = "fleet";
  int warmup_runs = 0;                         ///< inferences before ready; 0 leaves `start`'s default
  RunConfig config;                            ///< how the child's sessions are made (its warm-up inputs too)
  std::vector<std::string> arguments;          ///< further `ortfleet start` flags (strategy's, profile, log)
  std::string ortfleet_executable;             ///< resolved by the caller (ortfleet_executable())
  std::string ort_library;
  std::map<std::string, std::string> environment;  ///< added to the child's environment
  double timeout_s = 3600;
  /// Non-empty: run this instead of `ortfleet start` (it must print the same report line).
  std::vector<std::string> command;
  /// Stops the child in order when requested (run_child); the diagnostics then end (throw_if_stopped).
  std::stop_token stop;
};

struct ColdStart {
  std::optional<StartReport> report;  ///< what the child reported, when it did
  std::string error;                  ///< why it did not, or which devices failed and why
  bool stopped = false;               ///< stopped on request, before it ended
  bool crashed = false;               ///< the child was killed by a crash's signal (SIGSEGV, SIGABRT, ...)
  bool ok() const { return report && report->all_ready && error.empty(); }
};

/// Ends a diagnostic that was asked to stop (its caller was interrupted: Ctrl-C in Python): throws
/// ortfleet::Error saying so; nothing when no stop was requested.
void throw_if_stopped(const std::stop_token& stop);

/// The command line of the request: `ortfleet -q [--ort-lib L] start MODEL --devices D --strategy S
/// --ready-line --config CONFIG_FILE [--warmup N] ARGUMENTS...` (the request's config saved in
/// `config_file`), or `command` when given.
std::vector<std::string> cold_start_command(const ColdStartRequest& request, const std::string& config_file);

/// The config as a child process reads it: its file paths absolute (the child may run elsewhere).
RunConfig config_for_child(RunConfig config);

/// Runs one cold start and reads its report. Never throws for a failed start (see ColdStart::error);
/// throws ortfleet::Error when the program cannot be run at all.
ColdStart run_cold_start(const ColdStartRequest& request);

}  // namespace ortfleet::detail
