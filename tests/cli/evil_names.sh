#!/usr/bin/env bash
# evil_names.sh ORTFLEET EVIL_MODEL_WRITER PYTHONPATH: names reach the terminal escaped (issue 58 item
# 5). A model file named evil<ESC>[31m<ESC>]0;TITLE<BEL><ESC>[2J<CR><LF>FAKEROW.onnx, whose input,
# output, node and dim names hold the same, goes through every command that prints names: start (its
# table, -v, its errors), doctor, profile, bench (start and inference), tune, the model cache's list, a
# pool's status and Python's errors. No ESC, BEL or CR byte may reach stdout or stderr, and no line may
# begin with FAKEROW (a newline inside a name starting a row of its own). A model path that is not
# UTF-8 (a raw C1 byte, 0x9b: CSI on an 8-bit terminal) starts, and is shown escaped.
set -uo pipefail
cli=$1 writer=$2 pythonpath=$3
PYTHON=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d); server=''
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$dir"' EXIT
export ORTFLEET_CACHE=$dir/cache ORTFLEET_AUTO_POOL=0 ORTFLEET_WARM_POOL_IDLE=0
evil=$'evil\e[31m\e]0;TITLE\a\e[2J\r\nFAKEROW.onnx'
model="$dir/$evil"
"$writer" "$model" || { echo "FAILED: cannot write the model"; exit 1; }
failures=0
# clean NAME CODES COMMAND...: the command exits with one of CODES, and its output drives no terminal.
clean() {
  local name=$1 codes=$2; shift 2
  timeout 300 "$@" >"$dir/out" 2>&1; local got=$?
  local raw fake
  raw=$(grep -c $'[\e\a\r]' "$dir/out"); fake=$(grep -c '^FAKEROW' "$dir/out")
  if [[ " $codes " != *" $got "* ]] || [ "$raw" -ne 0 ] || [ "$fake" -ne 0 ]; then
    echo "FAILED $name: exit $got (expected $codes), $raw lines with a raw ESC, BEL or CR, $fake lines begun by a name's newline"
    cat -v "$dir/out" | head -20; failures=$((failures + 1))
  else
    echo "ok   $name (exit $got)"
  fi
}
clean start 0 "$cli" start "$model" --devices cpu
clean "start -v" 0 "$cli" -v start "$model" --devices cpu --strategy threads
clean "start --json" 0 "$cli" start "$model" --devices cpu --json
"$cli" start "$model" --devices cpu --json | "$PYTHON" -c "import json, sys; json.load(sys.stdin)" || { echo "FAILED: start --json is not JSON"; failures=$((failures + 1)); }
clean "start, a bucket of no input (the error lists the inputs)" 2 "$cli" start "$model" --devices cpu --buckets nosuch.1=2
clean "start, a shape the model refuses" 2 "$cli" start "$model" --devices cpu --shapes "nosuch=1x16"
clean "start, no such model" 1 "$cli" start "$model.missing" --devices cpu
clean "doctor MODEL" 0 "$cli" doctor "$model"
clean profile 0 "$cli" profile "$model" --devices cpu
clean bench 0 "$cli" bench "$model" --devices cpu --runs 1 --no-anchors
clean "bench --inference" 0 "$cli" bench "$model" --devices cpu --inference --seconds 1 --no-anchors
clean tune 0 "$cli" tune "$model" --devices cpu --repeat 1
clean "start, filling the model cache" 0 "$cli" start "$model" --devices cpu --model-cache --model-cache-fill inline
clean "cache list" 0 "$cli" cache list
"$cli" serve --devices cpu --no-prime --socket "$dir/pool.sock" >"$dir/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do "$cli" -q pool status --socket "$dir/pool.sock" >/dev/null 2>&1 && break; sleep 0.1; done
clean "start on a pool" 0 "$cli" start "$model" --devices cpu --pool "$dir/pool.sock"
clean "pool status" 0 "$cli" pool status --socket "$dir/pool.sock"
"$cli" -q pool stop --socket "$dir/pool.sock" >/dev/null 2>&1; wait $server 2>/dev/null; server=''
clean "serve's log" 0 cat "$dir/serve.log"
cat > "$dir/errors.py" <<'PY'
import sys, numpy as np, ortfleet
model = sys.argv[1]
for what, call in [("buckets", lambda: ortfleet.Fleet(model, devices="cpu", buckets={"nosuch.1": [2]})),
                   ("missing", lambda: ortfleet.Fleet(model + ".missing", devices="cpu"))]:
    try:
        call()
        sys.exit(f"{what}: no error")
    except ortfleet.Error as e:
        print(f"{what}: {e}")
with ortfleet.Fleet(model, devices="cpu", strategy="threads") as fleet:
    fleet.start()
    assert fleet.wait()
    try:
        fleet.run(0, {"nosuch": np.zeros((1, 16), np.float32)})
        sys.exit("run: no error")
    except ortfleet.Error as e:
        print(f"run: {e}")
PY
clean "Python's errors" 0 env PYTHONPATH="$pythonpath" "$PYTHON" "$dir/errors.py" "$model"
grep -q "Its inputs are: in\\\\e\[31m" "$dir/out" || { echo "FAILED: Python's error does not show the input's name escaped"; failures=$((failures + 1)); }
# A path that is not UTF-8: it starts, and is shown escaped.
c1=$'c1\x9b2J.onnx'
cp "$model" "$dir/$c1"
clean "start, a path that is not UTF-8" 0 "$cli" start "$dir/$c1" --devices cpu
grep -q 'c1\\x9b2J.onnx' "$dir/out" || { echo "FAILED: the path's C1 byte is not shown as \\x9b"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "evil names: ok"
exit $((failures > 0))
