#pragma once
// Running a program as a fresh process and reading its report: how bench, profile and tune time
// cold starts (a second start inside one process reuses loaded libraries and CUDA contexts and
// looks several times faster than it is).
#include <cstdint>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace ortfleet::detail {

struct ChildResult {
  int exit_code = -1;          ///< -1 when killed by a signal or the timeout
  int signal = 0;              ///< the signal that killed it (SIGSEGV, SIGKILL...), 0 otherwise
  std::string report_line;     ///< the first stdout line that starts with `report_prefix`
  std::string stdout_text;     ///< everything else on stdout
  std::string stderr_tail;     ///< the last lines of stderr
  int64_t spawn_ns = 0;        ///< monotonic clock, just before the spawn
  bool timed_out = false;
  bool stopped = false;        ///< stopped because `stop` asked it (run_child)
  std::string describe() const;  ///< "exited with code 1: <stderr tail>"
  /// Killed by the signal of a crash (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL), not by a timeout or a stop.
  bool crashed() const;
};

/// How long a stopped child has after SIGTERM to end, with what it started, before SIGKILL.
inline constexpr double kStopGraceS = 5;
/// How long a child is waited for after SIGKILL before run_child returns without it.
inline constexpr double kReapWaitS = 5;

/// Runs `argv` with `extra_env` added to this process's environment (and ORTFLEET_SPAWN_NS set to the
/// spawn time), waits for it to exit or for `timeout_s` (a child that closes its output and runs on is
/// killed at the timeout too). Throws ortfleet::Error if it cannot start.
/// With a `stop` that can be requested, the child leads a process group of its own (a terminal's
/// Ctrl-C reaches the caller only), and a request stops it in order: SIGTERM to its group, SIGKILL
/// after kStopGraceS; the result says `stopped`.
ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env,
                      const std::string& report_prefix, double timeout_s, std::stop_token stop = {});

/// Finds an executable next to this binary (or in its bin/, ../bin/), else on $PATH.
std::optional<std::string> find_sibling_executable(const std::string& name);

/// The `ortfleet` command line that bench, profile and tune run as fresh processes: `explicit_path`
/// when given, else found as find_sibling_executable() does. Throws ortfleet::Error when missing.
std::string ortfleet_executable(const std::string& explicit_path);

}  // namespace ortfleet::detail
