#!/usr/bin/env bash
# slow_class_probe.sh NAME MODEL LIMIT [start flags...]
# One plain start (no model cache, no pool) of a slow-class candidate on GPU 0 under each cuDNN search
# (EXHAUSTIVE, HEURISTIC, DEFAULT) and on the CPU EP, each a fresh process killed after LIMIT seconds,
# `ortfleet start --json` into $RESULTS/NAME-CASE.json (issue 61: which models start in minutes in plain
# ONNX Runtime, and what a quick first session could cost instead).
set -u
name=$1 model=$2 limit=$3; shift 3
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=/tmp/cache-slow-$name
for algo in EXHAUSTIVE HEURISTIC DEFAULT; do
  s=$(date +%s%N)
  timeout --kill-after=5 "$limit" $ORTFLEET start "$model" --devices 0 --no-model-cache --conv-algo $algo --json "$@" > "$RESULTS/$name-$algo.json" 2> "$RESULTS/$name-$algo.err"
  echo "$name $algo rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
s=$(date +%s%N)
timeout --kill-after=5 "$limit" $ORTFLEET start "$model" --devices cpu --no-model-cache --json "$@" > "$RESULTS/$name-cpu.json" 2> "$RESULTS/$name-cpu.err"
echo "$name cpu rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-*.json
