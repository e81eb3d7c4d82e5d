#pragma once
// The one clock of every timeline: CLOCK_MONOTONIC is shared by all processes of the machine, so the
// phases of worker and child processes line up with their parent's.
#include <cstdint>

namespace ortfleet {

/// Nanoseconds on CLOCK_MONOTONIC.
int64_t monotonic_ns();

}  // namespace ortfleet
