#!/usr/bin/env bash
# The N slowest steps of a ninja build from its .ninja_log (v5: start ms, end ms, mtime, output, hash),
# with the build's wall time and the sum of every step's time (what the steps cost the cores).
# Usage: slowest-steps.sh BUILD/.ninja_log [N]
set -euo pipefail
awk -v n="${2:-15}" -F'\t' '
  /^#/ { next }
  { secs = ($2 - $1) / 1000; total += secs; if ($2 > last) last = $2; steps++
    lines[steps] = sprintf("%8.1f s  %s", secs, $4) }
  END {
    printf "%d steps, %.0f s of wall time, %.0f s of step time in all\n", steps, last / 1000, total
    for (i = 1; i <= steps; i++) print lines[i] | "sort -rn | head -n " n
  }' "$1"
