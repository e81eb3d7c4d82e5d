#!/usr/bin/env bash
# Issue 26, item 3, on the GPU machine: what makes the corpus models that crash ONNX Runtime 1.29's
# CUDA EP run, each try in a fresh process (`doctor --crash-step`, which writes outputs.npz), its
# outputs compared with the CPU EP's on the same inputs:
#   node  the core library of onnxruntime-node 1.29.0 (npm; built with CUDA) instead of the CPU-only
#         core of com.github.asus4.onnxruntime, with the same CUDA EP library
#   pin   the default core, the crashing op's nodes pinned to the CPU EP
#         (session.name_based_layer_assignment, ONNX Runtime 1.29)
# Needs $ORTFLEET, $MODELS, $RESULTS, $ORTFLEET_CUDA_EP (bench/device/run.sh, env.sh) and
# .device/ortnode/core.xz (xz of onnxruntime-node-1.29.0's bin/napi-v6/linux/x64/libonnxruntime.so.1).
set -u
R=$RESULTS/workarounds
mkdir -p "$R"
NODE=/tmp/ortnode
if [ ! -f $NODE/libonnxruntime.so.1 ]; then mkdir -p $NODE && xz -dc .device/ortnode/core.xz > $NODE/libonnxruntime.so.1; fi
for f in "$(dirname "$ORTFLEET_CUDA_EP")"/libonnxruntime_providers_*.so; do ln -sf "$f" $NODE/; done
warmup_flags() {
  /usr/bin/env python3 -c "import json; m={x['name']: x for x in json.load(open('tests/corpus/models.json'))['models']}; print(' '.join(m['$1'].get('warmup', [])))"
}
# try MODEL LABEL DEVICE "GLOBAL FLAGS" [DOCTOR FLAGS...]
try() {
  local m=$1 label=$2 dev=$3 globals=$4
  shift 4
  local d=$R/$m/$label
  mkdir -p "$d"
  local s=$(date +%s%N)
  # shellcheck disable=SC2046,SC2086
  timeout -k 5 150 "$ORTFLEET" -q $globals doctor "$MODELS/$m.onnx" --crash-step "$d" --device "$dev" $(warmup_flags "$m") "$@" > "$d/log.txt" 2>&1
  local rc=$?
  echo "$m $label $dev rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms $(tail -c 300 "$d/log.txt" | tr '\n' ' ')" | tee -a "$R/summary.txt"
}
declare -A PIN=([isnet_quint8]=Resize [isnet_fp16]=Resize [ppocrv4_rec]=Slice [oww_hey_jarvis]=If [silero_vad_v4]=If [silero_vad_v5]=If)
for m in ${ONLY:-isnet_quint8 ppocrv4_rec oww_hey_jarvis silero_vad_v4 silero_vad_v5 isnet_fp16}; do
  [ -f "$MODELS/$m.onnx" ] || { echo "$m: not staged" | tee -a "$R/summary.txt"; continue; }
  try "$m" cpu cpu ""
  try "$m" node cuda:0 "--ort-lib $NODE/libonnxruntime.so.1"
  try "$m" pin cuda:0 "" --session-config "session.name_based_layer_assignment=cpu(${PIN[$m]})"
done
/usr/bin/env python3 - "$R" <<'PY' | tee -a "$R/summary.txt"
import os, sys, numpy as np
root = sys.argv[1]
for m in sorted(os.listdir(root)):
    ref = os.path.join(root, m, "cpu", "outputs.npz")
    if not os.path.exists(ref):
        continue
    want = np.load(ref)
    for label in ("node", "pin"):
        p = os.path.join(root, m, label, "outputs.npz")
        if not os.path.exists(p):
            print(f"{m} {label}: no outputs (crashed or failed)")
            continue
        got = np.load(p)
        worst = []
        for k in want.files:
            a, b = want[k].astype(np.float64), got[k].astype(np.float64)
            scale = max(float(np.abs(a).max()), 1e-6)
            worst.append(f"{k}: max |diff| {float(np.abs(a - b).max()):.3g} (scale {scale:.3g})")
        print(f"{m} {label}: " + "; ".join(worst))
PY
