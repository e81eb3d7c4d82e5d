#!/usr/bin/env bash
# The tests of the fleet's threads and processes (tests/fleet and tests/process, one program of their own:
# ortfleet_fleet_process_tests) under ThreadSanitizer, then AddressSanitizer + UBSan, as CI runs them
# (.ci/run): the presets tsan-fleet-process and asan-fleet-process build that program, the worker it starts
# and the library in build/tsan-fleet-process and build/asan-fleet-process, and run its tests. Every report
# fails the run, the worker processes' included: the test presets write each process's reports to
# build/<preset>/sanitizer-reports/, which this script checks is empty afterwards.
# Usage: scripts/test-sanitizers.sh [tsan|asan]...   (both, in that order, by default)
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=("$@")
[ ${#sanitizers[@]} -gt 0 ] || sanitizers=(tsan asan)
status=0
for s in "${sanitizers[@]}"; do
  case "$s" in tsan|asan) ;; *) echo "test-sanitizers: unknown sanitizer '$s' (tsan or asan)" >&2; exit 2 ;; esac
  start=$(date +%s)
  cmake --preset "$s-fleet-process" >/dev/null
  cmake --build --preset "$s-fleet-process"
  reports="build/$s-fleet-process/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  # Twice as many tests as cores at once: most of their time is waiting (for a worker, a deadline), and
  # on 2 cores -j4 took three quarters of -j2's time, with no test the worse for it.
  ctest --preset "$s-fleet-process" -j "$(( 2 * $(nproc) ))" || status=1
  if compgen -G "$reports/*" >/dev/null; then
    echo "test-sanitizers: $s reported in $(ls "$reports" | wc -l) process(es):" >&2
    cat "$reports"/* >&2
    status=1
  fi
  echo "test-sanitizers: $s done in $(( $(date +%s) - start )) s" >&2
done
exit $status
