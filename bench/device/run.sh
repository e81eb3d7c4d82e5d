#!/usr/bin/env bash
# Runs ortfleet's measurements on the GPU machine (see ../shared/device/README.md for staging ONNX
# Runtime there). Usage, from the checkout on the device, after `source .../env.sh`:
#   bench/device/run.sh BIN_DIR PLAN      PLAN: lines "name SECONDS: command" (BIN_DIR/ortfleet is $ORTFLEET)
# Each step runs under its own time limit, so one slow step cannot eat the whole call.
# Each step's output lands in $RESULTS/<name>.txt; everything is packed into $OUT/results.tgz after
# every step, so a call cut short still brings back what finished.
set -uo pipefail
BIN=$(cd "$1" && pwd); PLAN=$2
export ORTFLEET="$BIN/ortfleet" ORTFLEET_WORKER="$BIN/ortfleet-worker" ORTFLEET_TEST_BIN_DIR="$BIN" BIN
export ORTFLEET_PYTHON_ANCHOR="$(pwd)/bench/anchors/onnxruntime_python.py"
export MODELS=${MODELS:-/tmp/ortfleet-models} RESULTS=${RESULTS:-/tmp/ortfleet-results}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$MODELS" "$RESULTS"
nvidia-smi -L > "$RESULTS/gpus.txt" 2>&1
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  head=${line%%:*}; cmd=${line#*:}
  name=${head%% *}; limit=${head##* }
  echo "=== $name (limit ${limit}s): $cmd"
  start=$(date +%s%N)
  timeout --kill-after=10 "$limit" bash -c "$cmd" > "$RESULTS/$name.txt" 2>&1
  rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$RESULTS/steps.txt"
  tail -n 25 "$RESULTS/$name.txt"
  [ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C "$RESULTS" .
done < "$PLAN"
