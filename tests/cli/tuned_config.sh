#!/usr/bin/env bash
# tuned_config.sh ORTFLEET MODEL WORK: tune writes its start-fast and serve-fast configs only for a gain
# over the first configuration beyond noise, and a config it writes is one `start --config` reads; where
# it writes none, its output says so, with the reason, and leaves no file.
set -uo pipefail
cli=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAILED: $*"; cat "$work/tune.txt"; exit 1; }
"$cli" tune "$model" --device cpu --quick --runs 3 --repeat 3 --write-config "$work/start-fast.json" \
  --write-serve-config "$work/serve-fast.json" --export-json "$work/tune.json" >"$work/tune.txt" 2>/dev/null || fail "tune failed"
for goal in start serve; do
  file=$work/$goal-fast.json
  recommended=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['${goal}_fast'] is not None)" "$work/tune.json")
  if [ "$recommended" = True ]; then
    [ -f "$file" ] || fail "tune recommended a $goal-fast configuration but wrote no $file"
    grep -q "^wrote the $goal-fast configuration to $file" "$work/tune.txt" || fail "no line says it wrote $file"
    "$cli" -q start "$model" --devices cpu --config "$file" >/dev/null || fail "start --config $file failed"
  else
    [ ! -e "$file" ] || fail "tune wrote $file with no gain beyond noise"
    grep -q "^no $goal-fast configuration written to $file: none beats the first configuration beyond noise" "$work/tune.txt" ||
      fail "nothing says why no $goal-fast config was written"
  fi
done
echo "ok: tune's configs, written only for a gain beyond noise, start"
