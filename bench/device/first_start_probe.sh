#!/usr/bin/env bash
# first_start_probe.sh NAME MODEL ROUNDS DEVICES [start flags...]
# Where a model's first start goes (issue 61), each case a fresh process, rounds interleaved, the warm
# pool off (ORTFLEET_AUTO_POOL=0), `ortfleet start --json` into $RESULTS/NAME-CASE-R.json:
#   plain    --no-model-cache: ONNX Runtime reads the model itself (the plain start)
#   first    a fresh, empty model cache (the start a new user sees first)
#   cached   the cache an untimed start filled first
#   inplace  --no-model-cache, the weights left in the .onnx and mapped by ONNX Runtime (ORTFLEET_WEIGHTS_IN_PLACE=1)
#   upload   the same, the weights uploaded by ortfleet (ORTFLEET_WEIGHTS_IN_PLACE=2)
set -u
name=$1 model=$2 rounds=$3 devices=$4; shift 4
export ORTFLEET_AUTO_POOL=0
cached=/tmp/cache-cached-$name
rm -rf "$cached"
ORTFLEET_CACHE=$cached $ORTFLEET start "$model" --devices "$devices" --json "$@" > /dev/null 2> "$RESULTS/$name-fill.err" || echo "$name: the filling start failed"
one() {  # CASE ROUND [env...] -- [flags...]
  local c=$1 r=$2; shift 2
  env "$@" > "$RESULTS/$name-$c-$r.json" 2> "$RESULTS/$name-$c-$r.err" || echo "$name-$c-$r: rc=$?"
}
for r in $(seq 1 "$rounds"); do
  one plain "$r" ORTFLEET_CACHE=/tmp/cache-plain-$name $ORTFLEET start "$model" --devices "$devices" --no-model-cache --json "$@"
  rm -rf /tmp/cache-first-$name
  one first "$r" ORTFLEET_CACHE=/tmp/cache-first-$name $ORTFLEET start "$model" --devices "$devices" --json "$@"
  one cached "$r" ORTFLEET_CACHE=$cached $ORTFLEET start "$model" --devices "$devices" --json "$@"
  one inplace "$r" ORTFLEET_WEIGHTS_IN_PLACE=1 ORTFLEET_CACHE=/tmp/cache-plain-$name $ORTFLEET start "$model" --devices "$devices" --no-model-cache --json "$@"
  one upload "$r" ORTFLEET_WEIGHTS_IN_PLACE=2 ORTFLEET_CACHE=/tmp/cache-plain-$name $ORTFLEET start "$model" --devices "$devices" --no-model-cache --json "$@"
done
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-{plain,first,cached,inplace,upload}-*.json
