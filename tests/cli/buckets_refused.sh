#!/usr/bin/env bash
# buckets_refused.sh ORTFLEET PYTHONPATH: buckets whose padding changes a model's outputs are refused
# at start-up, and never advised (issue 58 item 1). An encoder layer of attention without a mask
# (ortfleet synth transformer, dynamic sequence): `start --buckets` exits 2 with one error line naming
# the output and its difference; Python's wait() raises; the stream bench advises no buckets. The same
# encoder with an attention mask padded with 0 keeps its outputs: its buckets start.
set -uo pipefail
cli=$1 pythonpath=$2
PYTHON=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
export ORTFLEET_CACHE=$dir/cache ORTFLEET_AUTO_POOL=0
fail() { echo "FAILED: $*"; echo "--- stdout:"; cat "$dir/out"; echo "--- stderr:"; cat "$dir/err"; exit 1; }
shape=(--layers 1 --hidden 64 --heads 1 --sequence 128 --vocabulary 100 --dynamic-sequence)
"$cli" -q synth transformer "$dir/attention.onnx" "${shape[@]}" >/dev/null || fail "synth"
"$cli" -q synth transformer "$dir/masked.onnx" "${shape[@]}" --attention-mask >/dev/null || fail "synth"

"$cli" start "$dir/attention.onnx" --devices cpu --buckets input_ids.1=16,32,64 >"$dir/out" 2>"$dir/err"; got=$?
[ "$got" -eq 2 ] || fail "start exited $got, expected 2"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "expected one error line"
grep -Eq "^ortfleet: error: buckets for input_ids.1 refused: padding changes the model's outputs: a call of input_ids.1 = 16 padded to 32 and cropped back gives '[^']+' max \|diff\| [0-9.e-]+ of [0-9.e-]+" "$dir/err" \
  || fail "the error does not name the output and its difference"
echo "ok: start refuses the buckets (exit 2)"

"$cli" start "$dir/masked.onnx" --devices cpu --buckets input_ids.1=16,32,64 --pad-value attention_mask=0 >"$dir/out" 2>"$dir/err" || fail "the masked encoder's buckets were refused"
echo "ok: the masked encoder's buckets start"

cat > "$dir/python.py" <<'PY'
import sys, ortfleet
with ortfleet.Fleet(sys.argv[1], devices="cpu", strategy="threads", buckets={"input_ids.1": [16, 32, 64]}) as fleet:
    fleet.start()
    try:
        fleet.wait()
        sys.exit("wait() returned")
    except ortfleet.Error as e:
        print(e)
PY
PYTHONPATH="$pythonpath" "$PYTHON" "$dir/python.py" "$dir/attention.onnx" >"$dir/out" 2>"$dir/err" || fail "Python did not raise"
grep -q "^buckets for input_ids.1 refused: padding changes the model's outputs" "$dir/out" || fail "Python's error does not say why"
echo "ok: Python's wait() raises"

"$cli" bench "$dir/attention.onnx" --inference --devices cpu --no-anchors --shape-stream 'input_ids=1x[8:128:8]' --stream-count 12 --stream-rounds 1 \
  >"$dir/out" 2>"$dir/err"
if grep -q -- "--buckets input_ids" "$dir/out" "$dir/err"; then fail "the bench advised buckets"; fi
grep -q "no buckets advised: padding changes this model's outputs" "$dir/out" || fail "the bench does not say why it advises no buckets"
echo "ok: the bench advises no buckets, and says why"
