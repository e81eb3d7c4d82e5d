#!/usr/bin/env bash
# start_cases.sh NAME MODEL ROUNDS DEVICES [start flags...]
# A model's start in the three cache states a user meets, each a fresh process, rounds interleaved:
#   NAME-plain-R.json   --no-model-cache
#   NAME-first-R.json   a fresh, empty model cache (the start a new user sees first)
#   NAME-cached-R.json  the cache that an untimed start filled first
# `ortfleet start --json` each into $RESULTS; the warm pool is off (ORTFLEET_AUTO_POOL=0).
set -u
name=$1 model=$2 rounds=$3 devices=$4; shift 4
export ORTFLEET_AUTO_POOL=0
cached=/tmp/cache-cached-$name
rm -rf "$cached"
ORTFLEET_CACHE=$cached $ORTFLEET start "$model" --devices "$devices" --json "$@" > /dev/null 2> "$RESULTS/$name-fill.err" || echo "$name: the filling start failed"
for r in $(seq 1 "$rounds"); do
  ORTFLEET_CACHE=/tmp/cache-plain-$name $ORTFLEET start "$model" --devices "$devices" --no-model-cache --json "$@" > "$RESULTS/$name-plain-$r.json" 2> "$RESULTS/$name-plain-$r.err"
  rm -rf /tmp/cache-first-$name
  ORTFLEET_CACHE=/tmp/cache-first-$name $ORTFLEET start "$model" --devices "$devices" --json "$@" > "$RESULTS/$name-first-$r.json" 2> "$RESULTS/$name-first-$r.err"
  ORTFLEET_CACHE=$cached $ORTFLEET start "$model" --devices "$devices" --json "$@" > "$RESULTS/$name-cached-$r.json" 2> "$RESULTS/$name-cached-$r.err"
done
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-{plain,first,cached}-*.json
