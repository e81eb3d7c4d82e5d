#pragma once
// The one clock of every timeline: CLOCK_MONOTONIC is shared by all processes of the machine, so the
// phases of worker and child processes line up with their parent's.
#include <cstdint>
#include <string>

namespace ortfleet {

/// Nanoseconds on CLOCK_MONOTONIC.
int64_t monotonic_ns();

/// The wall-clock time now, UTC: "2026-11-23T07:00:00Z" (dates on reports and records).
std::string utc_now();

}  // namespace ortfleet
