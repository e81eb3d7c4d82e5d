#!/usr/bin/env bash
# pool_clients.sh MODEL ROUNDS: the same pool of `ortfleet serve`, started from the command line
# (`ortfleet start --pool`, timed from exec) and from Python (`Fleet(model, pool=SOCKET)`), each with
# a new session (the pool evicts first) and resident. One JSON line per start.
set -uo pipefail
model=$1 rounds=${2:-3}
folder=$(mktemp -d)  # a folder only this user can write: serve refuses a world-writable one
socket=$folder/pool.sock
"$ORTFLEET" -q serve --socket "$socket" &
server=$!
for _ in $(seq 1 600); do "$ORTFLEET" -q pool status --socket "$socket" --json 2>/dev/null | grep -q '"state": "starting"' || { [ -S "$socket" ] && break; }; sleep 0.05; done
"$ORTFLEET" pool status --socket "$socket"
here=$(dirname "$0")
for r in $(seq 1 "$rounds"); do
  for kind in new resident; do
    [ $kind = new ] && "$ORTFLEET" -q pool evict --socket "$socket" >/dev/null
    echo "cli $kind $("$ORTFLEET" -q start "$model" --pool "$socket" --ready-line | head -1 | python3 -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps({"wall_ms": (r["ready_ns"]-r["spawn_ns"])/1e6, "resident": [d["resident"] for d in r["devices"]]}))')"
  done
  for kind in new resident; do
    [ $kind = new ] && "$ORTFLEET" -q pool evict --socket "$socket" >/dev/null
    echo "python $kind $(PYTHONPATH=${PYTHONPATH:-} python3 "$here/pytorch_job.py" "$model" --pool "$socket" --no-torch)"
  done
done
kill -TERM $server; wait $server
