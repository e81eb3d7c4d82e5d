#!/usr/bin/env bash
# Every corpus model (scripts/fetch-real-models.sh) on a CPU node daemon: started twice (a new session, then resident), the daemon's
# shape checked after each model (at most two workers once consolidated).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
cli=$ROOT/build/release/bin/ortfleet
export XDG_RUNTIME_DIR=$(mktemp -d) ORTFLEET_CACHE=$(mktemp -d); chmod 700 $XDG_RUNTIME_DIR
unset ORTFLEET_AUTO_POOL
$cli serve --detach --devices cpu --park-after 1 >/dev/null || exit 1
python3=/usr/bin/python3
$python3 -c "import json; [print(m['name'], ' '.join(m.get('warmup', []))) for m in json.load(open('$ROOT/tests/corpus/models.json'))['models']]" |
while read -r name args; do
  m=$ROOT/.deps/models/$name.onnx
  a=$( { /usr/bin/time -f %e $cli start $m $args --json > /tmp/cd1.json; } 2>&1 | tail -1)
  r1=$($python3 -c "import json; d=json.load(open('/tmp/cd1.json')); print(d.get('all_ready'), [x.get('resident') for x in d['devices']], [x.get('error','')[:80] for x in d['devices'] if x.get('error')])")
  b=$( { /usr/bin/time -f %e $cli start $m $args --json > /tmp/cd2.json; } 2>&1 | tail -1)
  r2=$($python3 -c "import json; d=json.load(open('/tmp/cd2.json')); print(d.get('all_ready'), [x.get('resident') for x in d['devices']])")
  echo "$name: first ${a}s $r1 | again ${b}s $r2"
done
for i in $(seq 1 120); do $cli -q pool status --json | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if not d.get(\"cache_fills\") and all(len(w[\"sessions\"])==0 for w in d[\"devices\"] if w[\"role\"]!=\"shared\") else 1)" && break; sleep 1; done; echo "waited $i s"
$cli pool status | sed -n '/^device  role/,/^in all/p'
$cli pool stop
