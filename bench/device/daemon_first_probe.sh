#!/usr/bin/env bash
# daemon_first_probe.sh NAME MODEL...: the first start of each MODEL on a parked node daemon (issue 61):
# `ortfleet serve --detach --devices 0 --park-after 3` on an empty model cache, primed and parked before
# any job, then each model's first job from the command line (`start --json` into $RESULTS/NAME-MODEL.json),
# the daemon parked again before the next (each a model new to the daemon and the node).
set -uo pipefail
name=$1; shift
export XDG_RUNTIME_DIR=$(mktemp -d) ORTFLEET_CACHE=$(mktemp -d)
chmod 700 "$XDG_RUNTIME_DIR"
"$ORTFLEET" serve --detach --devices 0 --park-after 3 || exit 1
wait_parked() {
  for _ in $(seq 1 120); do
    "$ORTFLEET" -q pool status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"]
sys.exit(0 if d and all(w.get("parked") for w in d if w.get("device", "").startswith("cuda") and w.get("state") == "ready") else 1)' && return 0
    sleep 0.5
  done
  echo "not parked after 60 s"
}
for model in "$@"; do
  wait_parked
  base=$(basename "$model" .onnx)
  s=$(date +%s%N)
  "$ORTFLEET" start "$model" --devices 0 --pool default --json > "$RESULTS/$name-$base.json" 2> "$RESULTS/$name-$base.err"
  echo "$base rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms (CLI exec to exit)"
done
"$ORTFLEET" pool status
"$ORTFLEET" pool stop
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-*.json
