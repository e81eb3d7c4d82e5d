#!/usr/bin/env bash
# Part c of the crash runs (crash-a/b.plan): the pool with a fresh cache (the crash not yet known), the
# bisect on the corpus models that also crash the CUDA EP, onnxruntime's Python API on the same
# models (is the crash ONNX Runtime's?), and the per-run cost of the crash scopes.
set -uo pipefail
M=/tmp/ortfleet-models O=/tmp/ortfleet-bin/ortfleet
export ORTFLEET=$O RESULTS=${RESULTS:-/tmp/ortfleet-results}
find "$RESULTS" -type f -size +512k -delete
(echo "== pool with a fresh cache"; ORTFLEET_CACHE=/tmp/fresh-cache bench/device/pool_crash.sh $M/isnet_quint8.onnx) > $RESULTS/pool_crash_fresh.txt 2>&1
tail -22 $RESULTS/pool_crash_fresh.txt
for spec in "oww_hey_jarvis" "silero_vad_v4 --shapes input=1x1536 --input-range sr=16000 --input-range h=0 --input-range c=0" "ppocrv4_rec --shapes x=1x3x48x320"; do
  set -- $spec; n=$1; shift
  $O doctor $M/$n.onnx --locate-crash --device 0 --out $RESULTS/locate_$n --try-timeout 60 "$@" > $RESULTS/locate_$n.txt 2>&1
  grep -E "name |op |input |CPU EP|tries in|smallest|note" $RESULTS/locate_$n.txt | sed "s/^/$n: /"
done
for n in isnet_quint8 oww_hey_jarvis silero_vad_v4 ppocrv4_rec ppocrv4_det; do
  timeout 120 python3 - "$M/$n.onnx" "$n" > $RESULTS/python_$n.txt 2>&1 <<'PY'
import os, sys, numpy as np, onnxruntime as ort
path, name = sys.argv[1:]
ort.register_execution_provider_library("CUDA", os.environ["ORTFLEET_CUDA_EP"])
devs = [d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider"]
so = ort.SessionOptions(); so.add_provider_for_devices(devs[:1], {})
s = ort.InferenceSession(path, sess_options=so)
feeds = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    shape = {"silero_vad_v4": {"input": [1, 1536]}, "ppocrv4_rec": {"x": [1, 3, 48, 320]}, "ppocrv4_det": {"x": [1, 3, 640, 640]}}.get(name, {}).get(i.name, shape)
    dt = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(float16)": np.float16}[i.type]
    feeds[i.name] = np.full(shape, 16000, dt) if i.name == "sr" else np.zeros(shape, dt) if i.name in ("h", "c") else np.random.rand(*shape).astype(dt)
s.run(None, feeds); print("ran")
PY
  echo "onnxruntime Python, CUDA EP, $n: rc=$? $(tail -1 $RESULTS/python_$n.txt | cut -c1-150)"
done 2>&1 | tee $RESULTS/python_baseline.txt
for h in 1 0 1 0; do echo "handler=$h"; ORTFLEET_CRASH_HANDLER=$h ORTFLEET_AUTO_POOL=0 $O bench $M/r50.onnx --inference --devices 0 2>&1 | tail -8; done > $RESULTS/containment_runs.txt 2>&1
tail -40 $RESULTS/containment_runs.txt
cd $RESULTS && tar czf $OUT/results2.tgz --exclude='*.onnx' --exclude='*.npz' --exclude='cache*' .
