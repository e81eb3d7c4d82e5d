#!/usr/bin/env bash
# pool_counts.sh NAME MODEL ROUNDS COUNTS... : on one `ortfleet serve` pool of every GPU in COUNTS' largest,
# a new session of MODEL on the first N GPUs (the pool's sessions evicted first) and then the same again
# (resident), rounds interleaved: $RESULTS/NAME-pool-gN-R.json and NAME-resident-gN-R.json.
set -u
name=$1 model=$2 rounds=$3; shift 3
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=/tmp/cache-pool-$name
max=0; for n in "$@"; do [ "$n" -gt "$max" ] && max=$n; done
sock=/tmp/pool-$name/pool.sock
$ORTFLEET serve --devices "0-$((max - 1))" --socket "$sock" > "$RESULTS/$name-serve.log" 2>&1 &
server=$!
for i in $(seq 1 120); do $ORTFLEET pool --socket "$sock" status > /dev/null 2>&1 && break; sleep 0.5; done
$ORTFLEET start "$model" --devices "0-$((max - 1))" --pool "$sock" --json > /dev/null 2> "$RESULTS/$name-pool-fill.err"
for r in $(seq 1 "$rounds"); do
  for n in "$@"; do
    $ORTFLEET pool --socket "$sock" evict > /dev/null
    $ORTFLEET start "$model" --devices "0-$((n - 1))" --pool "$sock" --json > "$RESULTS/$name-pool-g$n-$r.json" 2> "$RESULTS/$name-pool-g$n-$r.err"
    $ORTFLEET start "$model" --devices "0-$((n - 1))" --pool "$sock" --json > "$RESULTS/$name-resident-g$n-$r.json" 2> "$RESULTS/$name-resident-g$n-$r.err"
  done
done
$ORTFLEET pool --socket "$sock" status > "$RESULTS/$name-pool-status.json" 2>&1
kill "$server"; wait "$server"
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-pool-g*-*.json "$RESULTS/$name"-resident-g*-*.json
