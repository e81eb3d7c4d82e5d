#!/usr/bin/env bash
# warm_node_cpu_pss.sh MODEL [UNLOAD_GB]: what each change of issue 60 does to a CPU worker's memory (PSS
# from /proc/PID/smaps_rollup), where the CPU can show it. A node daemon on the CPU whose workers park by
# SIGSTOP (ORTFLEET_TEST_PARK_CPU=1), on a node of its own (fresh runtime folder and model cache):
#   1. `serve --preload MODEL --park-after 2`: the shared worker with the session made from the model
#      (an empty cache), and the blank spare beside it (what "no spare while parked" stops)
#   2. once idle: the session made again from its cache entry (the daemon's log says the worker's PSS
#      before and after), then parked; the spare stopped
#   3. restarted with `--unload-above UNLOAD_GB` (default 0.01): parked with the model unloaded
# $ORTFLEET is the CLI. What only a GPU shows (GPU memory, the driver's checkpoint in host memory): the
# plan bench/device/warm_node_probe.sh.
set -uo pipefail
model=$1 unload=${2:-0.01}
export XDG_RUNTIME_DIR=$(mktemp -d) ORTFLEET_CACHE=$(mktemp -d) ORTFLEET_TEST_PARK_CPU=1
chmod 700 "$XDG_RUNTIME_DIR"
trap '"$ORTFLEET" -q pool stop >/dev/null 2>&1' EXIT
show() {  # LABEL: each worker's role, state, sessions and PSS (all, anonymous)
  "$ORTFLEET" -q pool status --json | python3 -c "$(cat <<'PY'
import json, sys
label = sys.argv[1]
for w in json.load(sys.stdin)["devices"]:
    m = {}
    try:
        for line in open("/proc/%d/smaps_rollup" % w["pid"]):
            p = line.split()
            if len(p) >= 2 and p[1].isdigit():
                m[p[0].rstrip(":")] = int(p[1]) * 1024
    except OSError:
        pass
    print("%-24s %-7s parked=%-5s sessions=%d unloaded=%d PSS %6.1f MiB (anonymous %6.1f MiB)" % (
        label, w["role"], w.get("parked"), len(w.get("sessions", [])), len(w.get("unloaded", [])), m.get("Pss", 0) / 2**20,
        m.get("Pss_Anon", 0) / 2**20))
PY
)" "$1"
}
await() {  # PYTHON-CONDITION on the status `s`
  for _ in $(seq 1 600); do
    "$ORTFLEET" -q pool status --json 2>/dev/null | python3 -c "import json, sys; s = json.load(sys.stdin); d = s['devices']; sys.exit(0 if ($1) else 1)" && return 0
    sleep 0.2
  done
  echo "timed out waiting for: $1"
}
"$ORTFLEET" -q serve --detach --devices cpu --park-after 2 --unload-above 0 --preload "$model"
await "s['preload']['state'] == 'done' and len(d) == 2 and all(w['state'] == 'ready' for w in d)"
show "made from the model"
await "all(w.get('parked') for w in d)"
show "from its entry, parked"
grep -h "made again from its cache entry" "$XDG_RUNTIME_DIR/ortfleet/pool.sock.log"
"$ORTFLEET" -q pool stop
"$ORTFLEET" -q serve --detach --devices cpu --park-after 2 --unload-above "$unload"
await "all(w.get('parked') for w in d) and d[0].get('unloaded')"
show "parked, unloaded"
tail -n 5 "$XDG_RUNTIME_DIR/ortfleet/pool.sock.log"
