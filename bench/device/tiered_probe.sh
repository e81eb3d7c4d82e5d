#!/usr/bin/env bash
# tiered_probe.sh NAME MODEL RUN_FOR: a slow-class model's start (issue 61) on GPU 0, each case a fresh
# process, the pool off, `ortfleet start --json` into $RESULTS/NAME-CASE.json:
#   plain      --no-model-cache: ONNX Runtime reads the model itself, cuDNN's search as configured
#   untiered   a first start on an empty cache, --tiered-start off
#   tiered     a first start on an empty cache (tiered: its first outputs from the quick session)
#   switch     the same in this process (--strategy sequential --model-cache: its session's tier is read
#              live), run for RUN_FOR seconds after ready: when the full session took over, and the calls
#              after it (p50_after_switch_ms)
#   fill       the entry made inline (the cuDNN record with it), untimed
#   cached     the cached start, run for 5 s after ready (its steady p50)
set -u
name=$1 model=$2 run_for=$3
export ORTFLEET_AUTO_POOL=0
one() {  # CASE [flags...]
  local c=$1; shift
  local s; s=$(date +%s%N)
  "$ORTFLEET" start "$model" --devices 0 --json "$@" > "$RESULTS/$name-$c.json" 2> "$RESULTS/$name-$c.err"
  echo "$name $c rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
}
rm -rf /tmp/tier-plain /tmp/tier-untiered /tmp/tier-tiered /tmp/tier-cached
ORTFLEET_CACHE=/tmp/tier-plain one plain --no-model-cache --run-for 5
ORTFLEET_CACHE=/tmp/tier-untiered one untiered --model-cache-fill off --tiered-start off
ORTFLEET_CACHE=/tmp/tier-tiered one tiered --model-cache-fill off
rm -rf /tmp/tier-tiered
ORTFLEET_CACHE=/tmp/tier-tiered one switch --strategy sequential --model-cache --model-cache-fill off --run-for "$run_for"
ORTFLEET_CACHE=/tmp/tier-cached one fill --model-cache-fill inline
ORTFLEET_CACHE=/tmp/tier-cached one cached --run-for 5
python3 "$(dirname "$0")/phases_summary.py" "$RESULTS/$name"-*.json
for f in "$RESULTS/$name"-*.json; do
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/', 1)[-1], 'calls:', json.dumps(d.get('calls_after_ready')), 'tiers:', json.dumps(d.get('tiers')))" "$f"
done
