#!/usr/bin/env bash
# build_ab.sh OLD_BIN NEW_BIN MODEL ROUNDS: two builds of ortfleet on the same GPU, as a change to how
# ortfleet is compiled must be checked (issue 46: the release build's speed kept). Rounds interleaved, the
# order alternating, each measurement a fresh process on cuda:0:
#   start  MODEL's cached start (`start --json`, the cache filled first by an untimed start of the same
#          build), timed from outside: exec to exit, in ms; and the start's own wall_ms
#   ring   the worker's round trip (`bench --inference` on an identity model, host inputs, AB_SECONDS
#          seconds a measurement, default 3): p50, p99
# One line per measurement, then each build's medians and new/old. JSON lands in $RESULTS/ab-*.
set -u
old=$1 new=$2 model=$3 rounds=$4
export ORTFLEET_AUTO_POOL=0
ident=$MODELS/identity.onnx
[ -f "$ident" ] || "$new/ortfleet" -q synth identity "$ident"
for b in old new; do
  ORTFLEET_WORKER=${!b}/ortfleet-worker ORTFLEET_CACHE=/tmp/ab-cache-$b "${!b}/ortfleet" start "$model" --devices cuda:0 > /dev/null 2> "$RESULTS/ab-fill-$b.err" ||
    echo "$b: the filling start failed: $(tail -1 "$RESULTS/ab-fill-$b.err")"
done
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    bin=${!b}
    export ORTFLEET_WORKER=$bin/ortfleet-worker  # each build with its own worker (run.sh names one)
    t0=$(date +%s%N)
    ORTFLEET_CACHE=/tmp/ab-cache-$b "$bin/ortfleet" start "$model" --devices cuda:0 --json > "$RESULTS/ab-start-$b-$r.json" 2> "$RESULTS/ab-start-$b-$r.err"
    t1=$(date +%s%N)
    echo "start $b $r $(((t1 - t0) / 1000000))" >> "$RESULTS/ab-exec.txt"
    "$bin/ortfleet" bench "$ident" --inference --devices cuda:0 --seconds "${AB_SECONDS:-3}" --json > "$RESULTS/ab-ring-$b-$r.json" 2> "$RESULTS/ab-ring-$b-$r.err"
  done
done
python3 - "$RESULTS" "$rounds" <<'PY'
import json, statistics, sys
results, rounds = sys.argv[1], int(sys.argv[2])
execs = {}
for line in open(f"{results}/ab-exec.txt"):
    _, b, r, ms = line.split()
    execs[(b, int(r))] = float(ms)
med = {}
for b in ("old", "new"):
    rows = []
    for r in range(1, rounds + 1):
        try:
            start = json.load(open(f"{results}/ab-start-{b}-{r}.json"))
            ring = next(x for x in json.load(open(f"{results}/ab-ring-{b}-{r}.json"))["rows"] if "request ring" in x["label"])
        except Exception as e:  # a failed round is shown, not hidden
            print(f"{b} round {r}: no result ({e})"); continue
        row = (execs[(b, r)], start["wall_ms"], ring["p50_ms"] * 1000, ring["p99_ms"] * 1000)
        rows.append(row)
        print(f"{b} round {r}: start exec-to-exit {row[0]:.0f} ms, wall_ms {row[1]:.1f} ms; ring p50 {row[2]:.1f} us, p99 {row[3]:.1f} us")
    if rows:
        med[b] = [statistics.median(c) for c in zip(*rows)]
        lo = [min(c) for c in zip(*rows)]; hi = [max(c) for c in zip(*rows)]
        print(f"{b} median (min-max): start {med[b][0]:.0f} ms ({lo[0]:.0f}-{hi[0]:.0f}), wall_ms {med[b][1]:.1f} ({lo[1]:.1f}-{hi[1]:.1f}); "
              f"ring p50 {med[b][2]:.1f} us ({lo[2]:.1f}-{hi[2]:.1f}), p99 {med[b][3]:.1f} us ({lo[3]:.1f}-{hi[3]:.1f})")
if len(med) == 2:
    names = ["start exec-to-exit", "start wall_ms", "ring p50", "ring p99"]
    print("new/old: " + ", ".join(f"{n} {med['new'][i] / med['old'][i]:.2f}x" for i, n in enumerate(names)))
PY
