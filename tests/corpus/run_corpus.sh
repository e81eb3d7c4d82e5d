#!/usr/bin/env bash
# Starts and runs every model of the real-model corpus (tests/corpus/models.json) with the default
# settings (model cache on) and its documented warm-up inputs, twice in a fresh cache: the first
# start's entry is written, verified and priced after it is ready, the second must find it. A model that needs real
# warm-up inputs must also fail without them with an error that names the made-up inputs.
# Usage: run_corpus.sh ORTFLEET_BINARY MODELS_DIR DEVICE     (DEVICE: cpu, or a GPU number)
# Exit 77 (skip) when the corpus was not fetched (scripts/fetch-real-models.sh).
set -uo pipefail
bin=$1 models=$2 device=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
if [ ! -f "$models/silero_vad_v5.onnx" ]; then
  echo "SKIP: the real-model corpus is not in $models; run scripts/fetch-real-models.sh" >&2; exit 77
fi
cpu_only_core=0
if [ "$device" != cpu ]; then
  doctor=$("$bin" doctor --json 2>/dev/null)
  gpus=$(echo "$doctor" | "$PYTHON" -c "import json, sys; print(len(json.load(sys.stdin).get('gpus') or []))" 2>/dev/null || echo 0)
  if [ "${gpus:-0}" = 0 ]; then echo "SKIP: no GPU" >&2; exit 77; fi
  # A CPU-only core under the CUDA EP crashes the models marked "cuda" (doctor's ort-core finding);
  # a CUDA-built core runs them all.
  cpu_only_core=$(echo "$doctor" | "$PYTHON" -c "import json, sys; print(int(any(f['check'] == 'ort-core' for f in json.load(sys.stdin)['findings'])))" 2>/dev/null || echo 1)
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export ORTFLEET_CACHE="$work/cache"
failures=0
# NAME, then its warm-up flags, one model per line (JSON strings; flags have no spaces).
"$PYTHON" - "$root/tests/corpus/models.json" "$device" "$cpu_only_core" > "$work/plan" <<'PY'
import json, sys
corpus = json.load(open(sys.argv[1]))
for m in corpus["models"]:
    if sys.argv[2] != "cpu" and "cuda" in m and sys.argv[3] == "1":
        continue  # crashes the CUDA EP under a CPU-only core: the crash tests cover it
    print(m["name"], " ".join(m["warmup"]))
PY
while read -r name flags; do
  model="$models/$name.onnx"
  # shellcheck disable=SC2086  # the flags are words by design
  for round in miss hit; do
    start=$(date +%s.%N)
    if ! "$bin" start "$model" --devices "$device" $flags --json > "$work/$name.$round.json" 2> "$work/$name.$round.err"; then
      echo "FAIL $name ($round): ortfleet start failed:"; tail -5 "$work/$name.$round.err"; failures=$((failures + 1)); continue 2
    fi
    outcome=$("$PYTHON" -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(' '.join(sorted({ev.get('args', {}).get('model_cache', '') for ev in r.get('timeline', {}).get('events', []) if ev.get('name') == 'session.create'})))
" "$work/$name.$round.json")
    echo "ok   $name ($round): ready in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s, model cache: ${outcome:-?}"
    # The entry was made after the first start was ready, verified and priced: the second start loads
    # it, or (priced as loading no faster than the model, as a tiny model's may be) the model itself.
    if [ "$round" = hit ] && [ "$outcome" != hit ] && [ "$outcome" != no-gain ]; then
      echo "FAIL $name: the second start did not find the verified cache entry (model cache: $outcome)"; failures=$((failures + 1))
    fi
    if grep -q "failed its check" "$work/$name.$round.err"; then
      echo "FAIL $name: its cache entry failed verification:"; grep "failed its check" "$work/$name.$round.err"; failures=$((failures + 1))
    fi
  done
  if [ -n "$flags" ]; then
    # Without its documented inputs the model must not become ready, and the error must say why.
    if "$bin" start "$model" --devices "$device" --no-model-cache > "$work/$name.bare.err" 2>&1; then
      : # some models accept made-up inputs after all (a static shape): nothing to check
    elif ! tr -s ' \n' ' ' < "$work/$name.bare.err" | grep -q "inputs ortfleet made up"; then  # the table wraps the error
      echo "FAIL $name: without warm-up inputs it failed, but the error does not name the made-up inputs:"; tail -3 "$work/$name.bare.err"
      failures=$((failures + 1))
    fi
  fi
done < "$work/plan"
# The case the model cache once broke: ONNX Runtime saves a graph with control flow in the ONNX format
# with initializers its loader refuses. Forced into that format, the entry must fail its check, the
# model must start from its own file, and the warning must not blame the model.
if [ "$device" = cpu ]; then
  # shellcheck disable=SC2046
  vad_flags=$("$PYTHON" -c "import json,sys; print(' '.join(next(m['warmup'] for m in json.load(open(sys.argv[1]))['models'] if m['name'] == 'silero_vad_v5')))" "$root/tests/corpus/models.json")
  for round in first later; do
    # shellcheck disable=SC2086
    if ! "$bin" start "$models/silero_vad_v5.onnx" --devices cpu $vad_flags --model-cache-format onnx > "$work/reject.$round.out" 2>&1; then
      echo "FAIL silero_vad_v5 with an ONNX-format entry ($round start): the start failed:"; tail -5 "$work/reject.$round.out"; failures=$((failures + 1))
    elif [ "$round" = first ] && ! grep -q "Your model is not at fault" "$work/reject.$round.out"; then
      echo "FAIL silero_vad_v5 with an ONNX-format entry: no warning that the cache, not the model, failed:"; tail -5 "$work/reject.$round.out"
      failures=$((failures + 1))
    else
      echo "ok   silero_vad_v5 with an ONNX-format entry ($round start): entry rejected, the model started"
    fi
  done
fi
echo "corpus on $device: $failures failure(s)"
[ "$failures" -eq 0 ]
