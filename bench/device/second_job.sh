#!/usr/bin/env bash
# second_job.sh NAME MODEL [start flags...]: jobs on a node where nobody installed `ortfleet serve`, each
# a fresh process, in a fresh cache and runtime folder: the first job's start (it leaves a warm pool
# behind) and its calls in the 10 s after ready while the pool starts and makes the cache entry; the
# same first job with nothing left behind (--warm-pool-idle 0 --model-cache-fill off), for its calls'
# p50; the second job (the model resident on the pool); a third after `pool evict` (a new session on
# the warm pool, from the entry). $RESULTS/NAME-job{1,1bare,2,3}.json, then one line of figures.
set -u
name=$1 model=$2; shift 2
export XDG_RUNTIME_DIR=/tmp/run-$name ORTFLEET_CACHE=/tmp/cache-jobs-$name ORTFLEET_WARM_POOL_IDLE=300
unset ORTFLEET_AUTO_POOL
rm -rf "$XDG_RUNTIME_DIR" "$ORTFLEET_CACHE" /tmp/cache-bare-$name; mkdir -m 700 "$XDG_RUNTIME_DIR"
ORTFLEET_CACHE=/tmp/cache-bare-$name $ORTFLEET start "$model" --devices 0 --json --run-for 10 --warm-pool-idle 0 --model-cache-fill off "$@" > "$RESULTS/$name-job1bare.json" 2> "$RESULTS/$name-job1bare.err"
$ORTFLEET start "$model" --devices 0 --json --run-for 10 "$@" > "$RESULTS/$name-job1.json" 2> "$RESULTS/$name-job1.err"
for i in $(seq 1 900); do
  $ORTFLEET -q pool status --json 2>/dev/null | grep -q "\"model\": \"$model\"" && break
  sleep 0.1
done
$ORTFLEET pool status > "$RESULTS/$name-pool-status.txt" 2>&1
$ORTFLEET start "$model" --devices 0 --json "$@" > "$RESULTS/$name-job2.json" 2> "$RESULTS/$name-job2.err"
$ORTFLEET pool evict > /dev/null 2>&1
$ORTFLEET start "$model" --devices 0 --json "$@" > "$RESULTS/$name-job3.json" 2> "$RESULTS/$name-job3.err"
cp "$XDG_RUNTIME_DIR/ortfleet/pool.sock.log" "$RESULTS/$name-pool.log" 2>/dev/null
$ORTFLEET pool stop > /dev/null 2>&1
python3 - "$RESULTS" "$name" <<'PY'
import json, sys
d, name = sys.argv[1], sys.argv[2]
def load(k):
    try:
        return json.load(open(f"{d}/{name}-{k}.json"))
    except Exception as e:
        return {"error": str(e)}
j = {k: load(k) for k in ("job1bare", "job1", "job2", "job3")}
w = {k: v.get("wall_ms", float("nan")) for k, v in j.items()}
c = {k: v.get("calls_after_ready", {}) for k, v in j.items()}
print(f"{name}: job 1 (leaves a pool) ready {w['job1']:.0f} ms, nothing left behind {w['job1bare']:.0f} ms; "
      f"calls in 10 s after ready p50 {c['job1'].get('p50_ms', 0):.3g} ms vs {c['job1bare'].get('p50_ms', 0):.3g} ms "
      f"({c['job1'].get('p50_ms', 0) / max(c['job1bare'].get('p50_ms', 1e-9), 1e-9):.3f}x; p99 {c['job1'].get('p99_ms', 0):.3g} vs {c['job1bare'].get('p99_ms', 0):.3g}); "
      f"job 2 resident {w['job2']:.0f} ms; job 3 new session on the pool {w['job3']:.0f} ms = {w['job3'] / w['job1bare']:.2f}x the cold start")
PY
