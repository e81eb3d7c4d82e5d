#!/usr/bin/env bash
# warm_node_probe.sh NAME MODEL ROUNDS [UNLOAD_GB]: a warm node (issue 60) on GPU 0, a node of its own (a
# fresh runtime folder and an empty model cache), Python jobs timed from outside as next_job.py times them
# (a fresh process, exec to the line "first-output"), CLI jobs exec to exit. Into $RESULTS/NAME-*.
#   plain      onnxruntime's Python API (CUDA EP as a plugin): the baseline, in this same run
#   first      `ortfleet serve --detach --devices 0 --park-after 3 --preload MODEL` on the empty cache: the
#              model made from itself, its entry made in the background, the session made again from the
#              entry at idle, parked (the spare stopped); PSS, GPU memory and smaps of each worker, parked
#   restarted  per round: `pool stop`, then `serve` again without --preload (it remembers what it served),
#              made resident from the entry and parked before the job; the Python job's exec to first output
#              ("first job after the daemon starts"); each worker's PSS parked before the job
#   ahead      per round, on the restarted daemon parked again: a Python job that makes its Fleet, then does
#              300 ms of its own work (reading inputs, say) before start(): the restore ahead overlaps that
#              work; against `ready`, the same job on the daemon not parked (the restore fully hidden when
#              the two agree)
#   next       per round: `ortfleet start MODEL --devices 0 --pool default` on the parked daemon (CLI exec
#              to exit), re-parked between
#   unloaded   with UNLOAD_GB given: the daemon restarted with `--unload-above UNLOAD_GB` (the model's
#              session dropped before parking, made again from its entry on the restore ahead); `next` again
#              (restore vs upload, for the threshold's default)
# The medians and ratios to plain are printed at the end (and written to $RESULTS/NAME-summary.json).
# A dry run on a machine without a GPU: DEVICE=cpu ORTFLEET_TEST_PARK_CPU=1 (CPU workers park by SIGSTOP;
# no plain row: it needs the CUDA EP).
set -uo pipefail
device=${DEVICE:-0}
name=$1 model=$2 rounds=$3 unload=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
export XDG_RUNTIME_DIR=$(mktemp -d) ORTFLEET_CACHE=$(mktemp -d)
chmod 700 "$XDG_RUNTIME_DIR"
unset ORTFLEET_AUTO_POOL
out=$RESULTS/$name
job=$(mktemp --suffix=.py)
trap '"$ORTFLEET" -q pool stop >/dev/null 2>&1; rm -f "$job"' EXIT
cat > "$job" <<'EOF'
# A Python job as users write one: its Fleet made, WORK_MS of its own work, then started and run once.
import os, sys, time
model, work_ms, device = sys.argv[1], float(sys.argv[2]), sys.argv[3]
import numpy as np
import ortfleet
with ortfleet.Fleet(model, devices=device) as fleet:
    if work_ms > 0:
        time.sleep(work_ms / 1000)  # the job's own work between making its Fleet and starting it
    fleet.start()
    fleet.wait()
    feeds = {i["name"]: np.zeros([d if d > 0 else 1 for d in i["shape"]], i.get("type", "float32")) for i in fleet.inputs}
    fleet.run(fleet.devices[0], feeds)
    print("first-output", flush=True)
    print(fleet.status()[0].get("resident"), flush=True)
EOF

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
# KIND ROUND CMD...: the command's exec to its line "first-output", in ms, appended to $out-times.txt.
first_output() {
  local kind=$1 r=$2; shift 2
  local s; s=$(date +%s%N)
  local t=""
  while IFS= read -r line; do
    [ "$line" = first-output ] && [ -z "$t" ] && t=$(ms_since "$s")
    echo "$line" >> "$out-$kind-$r.out"
  done < <("$@" 2>> "$out-$kind-$r.err")
  echo "$kind $r ${t:-failed}" | tee -a "$out-times.txt"
}
status() { "$ORTFLEET" -q pool status --json 2>/dev/null; }
# Waits until the daemon made what it makes at start, no entry is in the making and its GPU workers are parked.
await_parked() {
  for _ in $(seq 1 240); do
    status | python3 -c '
import json, os, sys
s = json.load(sys.stdin); d = s["devices"]
every = os.environ.get("ORTFLEET_TEST_PARK_CPU") == "1"  # a dry run: CPU workers park too
ok = d and s.get("preload", {}).get("state", "done") == "done" and not s.get("cache_fills") and all(w.get("parked") for w in d if every or w["device"].startswith("cuda"))
sys.exit(0 if ok else 1)' && return 0
    sleep 0.25
  done
  echo "not parked after 60 s"; status; return 1
}
# LABEL: each worker's role, PSS (all and anonymous, from smaps_rollup), GPU memory and what it holds.
snapshot() {
  status > "$out-status-$1.json"
  python3 - "$1" "$out-status-$1.json" <<'EOF' | tee -a "$out-memory.txt"
import json, sys
label, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
def smaps(pid):
    out = {}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        pass
    return out
total = 0
for w in s["devices"]:
    m = smaps(w["pid"])
    total += m.get("Pss", 0)
    print(f"{label:12} {w['device']:7} {w['role']:7} pid {w['pid']:7} parked={w.get('parked')!s:5} sessions={len(w.get('sessions', []))} "
          f"unloaded={len(w.get('unloaded', []))} PSS {m.get('Pss', 0) / 2**30:.2f} GiB (anon {m.get('Pss_Anon', 0) / 2**30:.2f}) "
          f"GPU {(w.get('gpu_memory_bytes') or 0) / 2**30:.2f} GiB")
print(f"{label:12} all workers: {len(s['devices'])}, PSS {total / 2**30:.2f} GiB")
EOF
}
serve() { "$ORTFLEET" -q serve --detach --devices "$device" --park-after 3 "$@" || { echo "serve failed"; exit 1; }; }

if [ "$device" != cpu ]; then
  for r in $(seq 1 "$rounds"); do first_output plain "$r" python3 "$here/next_job.py" --job ort "$model" ""; done
fi

s=$(date +%s%N)
serve --preload "$model"
await_parked && echo "first: the daemon made $model resident, its entry, the session again from it, and parked in $(ms_since "$s") ms"
snapshot first

for r in $(seq 1 "$rounds"); do
  "$ORTFLEET" -q pool stop
  s=$(date +%s%N)
  serve
  await_parked && echo "restarted $r: resident and parked $(ms_since "$s") ms after serve"
  [ "$r" = 1 ] && snapshot restarted
  first_output restarted "$r" python3 "$job" "$model" 0 "$device"
  await_parked
  first_output ahead "$r" python3 "$job" "$model" 300 "$device"
  first_output ready "$r" python3 "$job" "$model" 300 "$device"  # right after: not parked
  await_parked
  s=$(date +%s%N)
  "$ORTFLEET" start "$model" --devices "$device" --pool default --json > "$out-next-$r.json" 2> "$out-next-$r.err"
  echo "next $r $(ms_since "$s")" | tee -a "$out-times.txt"
done

if [ -n "$unload" ]; then
  "$ORTFLEET" -q pool stop
  serve --unload-above "$unload"
  await_parked
  snapshot unloaded
  for r in $(seq 1 "$rounds"); do
    await_parked
    s=$(date +%s%N)
    "$ORTFLEET" start "$model" --devices "$device" --pool default --json > "$out-unloaded-$r.json" 2> "$out-unloaded-$r.err"
    echo "unloaded $r $(ms_since "$s")" | tee -a "$out-times.txt"
  done
  await_parked
  first_output unloaded-ahead 1 python3 "$job" "$model" 300 "$device"
fi
"$ORTFLEET" pool status
tail -n 40 "$XDG_RUNTIME_DIR/ortfleet/pool.sock.log" > "$out-daemon.log" 2>/dev/null
python3 - "$out-times.txt" "$out-summary.json" <<'EOF'
import json, statistics, sys
times = {}
for line in open(sys.argv[1]):
    kind, _, ms = line.split()
    if ms != "failed":
        times.setdefault(kind, []).append(float(ms))
med = {k: statistics.median(v) for k, v in times.items()}
plain = med.get("plain")
for k, m in med.items():
    print(f"{k:16} median {m:7.0f} ms" + (f"  {m / plain:.2f}x plain" if plain and k != "plain" else "") + f"  ({times[k]})")
json.dump({"times_ms": times, "median_ms": med}, open(sys.argv[2], "w"), indent=1)
EOF
