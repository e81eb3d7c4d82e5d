#!/usr/bin/env bash
# first_start_probe.sh NAME MODEL ROUNDS DEVICES [start flags...]
# Where a model's first start went before the model's view was the default (issue 61, measure first;
# ran on a982575, whose prototype read ORTFLEET_WEIGHTS_IN_PLACE): start_cases.sh's three cache states
# (plain, first, cached), then each round two cases more, into $RESULTS/NAME-CASE-R.json:
#   inplace  --no-model-cache, the weights left in the .onnx and mapped by ONNX Runtime (ORTFLEET_WEIGHTS_IN_PLACE=1)
#   upload   the same, the weights uploaded by ortfleet (ORTFLEET_WEIGHTS_IN_PLACE=2)
set -u
name=$1 model=$2 rounds=$3 devices=$4; shift 4
"$(dirname "$0")/start_cases.sh" "$name" "$model" "$rounds" "$devices" "$@"
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=/tmp/cache-plain-$name
for r in $(seq 1 "$rounds"); do
  for variant in inplace:1 upload:2; do
    ORTFLEET_WEIGHTS_IN_PLACE=${variant#*:} $ORTFLEET start "$model" --devices "$devices" --no-model-cache --json "$@" \
      > "$RESULTS/$name-${variant%:*}-$r.json" 2> "$RESULTS/$name-${variant%:*}-$r.err" || echo "$name-${variant%:*}-$r: rc=$?"
  done
done
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-{inplace,upload}-*.json
