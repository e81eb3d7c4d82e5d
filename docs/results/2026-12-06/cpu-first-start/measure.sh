#!/usr/bin/env bash
# Issue 61's CPU target on this project's 2-core VM: `ortfleet bench` of the 426 MB transformer, the fleet's
# rows only (cached, empty cache, no model cache), each in a fresh process, medians of 5 rounds after 1.
# Usage: measure.sh ORTFLEET OUT_DIR
set -euo pipefail
cli=$1 out=$2
model=/tmp/t426.onnx
[ -f "$model" ] || "$cli" -q synth transformer "$model" --layers 6 --hidden 1024 --heads 16 --sequence 128 --vocabulary 30000
uptime > "$out/load.txt"
"$cli" bench "$model" --devices cpu --strategies fleet --no-pool --no-next-job --no-anchors --runs 5 \
  --export-json "$out/bench.json" > "$out/bench.txt" 2> "$out/bench.err"
uptime >> "$out/load.txt"
