#!/usr/bin/env bash
# gpu_counts.sh NAME MODEL ROUNDS COUNTS... : the fleet's start of MODEL on the first N GPUs for each N of
# COUNTS, cached (the cache filled first by an untimed start on all of them), rounds interleaved, each a
# fresh process: $RESULTS/NAME-gN-R.json, then the phases of each against N=1.
set -u
name=$1 model=$2 rounds=$3; shift 3
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=/tmp/cache-counts-$name
max=0; for n in "$@"; do [ "$n" -gt "$max" ] && max=$n; done
$ORTFLEET start "$model" --devices "0-$((max - 1))" --json > /dev/null 2> "$RESULTS/$name-counts-fill.err" || echo "$name: the filling start failed"
for r in $(seq 1 "$rounds"); do
  for n in "$@"; do
    $ORTFLEET start "$model" --devices "0-$((n - 1))" --json > "$RESULTS/$name-g$n-$r.json" 2> "$RESULTS/$name-g$n-$r.err"
  done
done
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-g*-*.json
