#!/usr/bin/env bash
# `ortfleet bench`'s next-job rows where the pool's workers park (a GPU's; here CPU workers told to park by
# ORTFLEET_TEST_PARK_CPU=1): every row runs and the bench ends 0. Before, the rows a parking pool adds moved
# the node daemon's rows under references to them: the bench ended in 'std::bad_alloc' on the CPU, and on an
# H100 exited 3 or never ended.
# Usage: bench_parked_rows.sh ORTFLEET MODEL
set -euo pipefail
cli=$1 model=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ortfleet-bench-parked.XXXXXX")
trap 'XDG_RUNTIME_DIR="$tmp/run" "$cli" -q pool stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/run" "$tmp/tmp"
chmod 700 "$tmp/run"
rc=0
ORTFLEET_TEST_PARK_CPU=1 ORTFLEET_CACHE="$tmp/cache" XDG_RUNTIME_DIR="$tmp/run" TMPDIR="$tmp/tmp" \
  timeout 240 "$cli" bench "$model" --devices cpu --runs 1 --warmup 0 --no-anchors --strategies fleet >"$tmp/out" 2>"$tmp/err" || rc=$?
fail() { echo "bench_parked_rows.sh: FAILED: $*" >&2; sed 's/^/  stdout: /' "$tmp/out" >&2; sed 's/^/  stderr: /' "$tmp/err" >&2; exit 1; }
[ "$rc" -eq 0 ] || fail "bench exited $rc"
for row in "next job, parked pool" "new session, parked pool" "new model, node daemon" "first job after the daemon starts"; do
  grep -q "^$row  " "$tmp/out" || fail "no timed row '$row'"
done
echo "ok: every next-job row ran on a parking pool"
