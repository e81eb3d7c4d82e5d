#!/usr/bin/env bash
# Runs ortfleet's measurements on the GPU machine (see ../shared/device/README.md for staging ONNX
# Runtime there). Usage, from the checkout on the device, after `source .../env.sh`:
#   bench/device/run.sh BIN_DIR PLAN      PLAN: a file of lines "name: command" (BIN_DIR/ortfleet is $ORTFLEET)
# Each step's output lands in $RESULTS/<name>.txt; everything is packed into $OUT/results.tgz after
# every step, so a call cut short still brings back what finished.
set -uo pipefail
BIN=$(cd "$1" && pwd); PLAN=$2
export ORTFLEET="$BIN/ortfleet" ORTFLEET_WORKER="$BIN/ortfleet-worker"
export ORTFLEET_PYTHON_ANCHOR="$(pwd)/bench/anchors/onnxruntime_python.py"
export MODELS=${MODELS:-/tmp/ortfleet-models} RESULTS=${RESULTS:-/tmp/ortfleet-results}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$MODELS" "$RESULTS"
nvidia-smi -L > "$RESULTS/gpus.txt" 2>&1
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  name=${line%%:*}; cmd=${line#*:}
  echo "=== $name: $cmd"
  start=$(date +%s%N)
  ( eval "$cmd" ) > "$RESULTS/$name.txt" 2>&1
  rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$RESULTS/steps.txt"
  tail -n 25 "$RESULTS/$name.txt"
  [ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C "$RESULTS" .
done < "$PLAN"
