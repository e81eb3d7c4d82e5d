#!/usr/bin/env bash
# pool_status_parked.sh DEVICES MODEL...: a node daemon (`ortfleet serve --detach`) on DEVICES that parks
# after 3 s, each MODEL started on it once from the command line, then `ortfleet pool status` (as a
# person reads it) once every worker has parked, and nvidia-smi's view of the GPUs. $ORTFLEET is the CLI.
set -uo pipefail
devices=$1; shift
export XDG_RUNTIME_DIR=$(mktemp -d) ORTFLEET_CACHE=$(mktemp -d)
chmod 700 "$XDG_RUNTIME_DIR"
"$ORTFLEET" serve --detach --devices "$devices" --park-after 3 || exit 1
for model in "$@"; do "$ORTFLEET" start "$model" --devices "$devices" >/dev/null || echo "start of $model failed"; done
parked=no
for _ in $(seq 1 240); do
  if "$ORTFLEET" -q pool status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"]
sys.exit(0 if d and all(w.get("parked") for w in d if w.get("device", "").startswith("cuda") and w.get("state") == "ready") else 1)'; then
    parked=yes; break
  fi
  sleep 0.5
done
echo "every GPU worker parked: $parked"
"$ORTFLEET" pool status
nvidia-smi --query-gpu=index,memory.used --format=csv
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
"$ORTFLEET" pool stop
