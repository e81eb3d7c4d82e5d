#!/usr/bin/env bash
# A shared pool holding another job's resident ResNet-50 while a crashing model starts on it:
# the other job's session must stay resident (its next start takes milliseconds) and the crashing
# job must get the worker's reason; a second try of the crashing model is refused at once.
# Usage: pool_crash.sh CRASHING_MODEL   (with $ORTFLEET, $MODELS, $RESULTS from run.sh)
set -uo pipefail
crashing=$1
sock=$RESULTS/pool.sock
$ORTFLEET -q synth resnet "$MODELS/r50.onnx" >/dev/null 2>&1 || true
$ORTFLEET serve --devices 0 --socket "$sock" > "$RESULTS/pool_serve_log.txt" 2>&1 &
serve=$!
for _ in $(seq 1 120); do [ -S "$sock" ] && $ORTFLEET pool status --socket "$sock" >/dev/null 2>&1 && break; sleep 1; done
echo "--- the other job's model, first and second start (the second resident)"
$ORTFLEET start "$MODELS/r50.onnx" --pool "$sock" --json > "$RESULTS/pool_r50_1.json" 2>&1; echo "rc=$?"
$ORTFLEET start "$MODELS/r50.onnx" --pool "$sock" --json > "$RESULTS/pool_r50_2.json" 2>&1; echo "rc=$?"
echo "--- the crashing model, twice"
$ORTFLEET start "$crashing" --pool "$sock" 2>&1 | tail -4; echo "rc=$?"
start=$(date +%s%N); $ORTFLEET start "$crashing" --pool "$sock" 2>&1 | tail -4; echo "rc=$? in $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "--- the other job's model again: still resident?"
$ORTFLEET start "$MODELS/r50.onnx" --pool "$sock" --json > "$RESULTS/pool_r50_3.json" 2>&1; echo "rc=$?"
python3 - "$RESULTS" <<'PY'
import json, sys
for n in (1, 2, 3):
    try:
        r = json.load(open(f"{sys.argv[1]}/pool_r50_{n}.json"))
        d = r["devices"][0]
        print(f"r50 start {n}: state={d.get('state')} resident={d.get('resident')} pid={d.get('pid')} ready after {r.get('wall_ms', 0):.1f} ms")
    except Exception as e:
        print(f"r50 start {n}: unreadable ({e})")
PY
$ORTFLEET pool status --socket "$sock" 2>&1 | tail -8
kill $serve; wait $serve 2>/dev/null
