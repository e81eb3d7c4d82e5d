#!/usr/bin/env bash
# The optimised-model cache's formats, measured on one GPU (issue 17): for each model, a start that
# fills the cache entry, then `ortfleet profile` of a start from it (session creation, the floor and
# the ratio to it), per variant. Usage: floor_formats.sh DEVICE MODEL... (from bench/device/run.sh:
# $ORTFLEET, $RESULTS set). Each variant gets a cache folder of its own, so every fill is a miss.
set -uo pipefail
device=$1; shift
declare -A variants=(
  [onnx]="--model-cache-format onnx"
  [ort]="--model-cache-format ort"
  [onnx-noprepack]="--model-cache-format onnx --session-config session.disable_prepacking=1"
  [ort-noprepack]="--model-cache-format ort --session-config session.disable_prepacking=1"
)
for model in "$@"; do
  name=$(basename "$model" .onnx)
  # The uncached start, for comparison: what a start without the cache costs (graph optimisation included).
  "$ORTFLEET" -q profile "$model" --device "$device" --no-model-cache --runs 10 --json > "$RESULTS/floor-$name-nocache.json" 2> "$RESULTS/floor-$name-nocache.err"
  for v in onnx ort onnx-noprepack ort-noprepack; do
    cache=$(mktemp -d /tmp/ortfleet-floor-cache.XXXXXX)
    # shellcheck disable=SC2086
    ORTFLEET_CACHE=$cache "$ORTFLEET" -q start "$model" --devices "$device" --model-cache ${variants[$v]} > "$RESULTS/floor-$name-$v-fill.txt" 2>&1
    # shellcheck disable=SC2086
    ORTFLEET_CACHE=$cache "$ORTFLEET" -q profile "$model" --device "$device" --model-cache ${variants[$v]} --runs 10 --json \
      > "$RESULTS/floor-$name-$v.json" 2> "$RESULTS/floor-$name-$v.err"
    ls -la "$cache/models" >> "$RESULTS/floor-$name-$v-fill.txt" 2>&1
    rm -rf "$cache"
  done
done
python3 "$(dirname "$0")/floor_summary.py" "$RESULTS"/floor-*.json
