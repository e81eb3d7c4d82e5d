#!/usr/bin/env bash
# The real-model corpus on the GPU (tests/corpus/run_corpus.sh: each model started twice in a fresh
# cache, the entry written and verified, then loaded) with the device's CPU-only core (the six models
# marked "cuda" left out) and with the layout `scripts/fetch-onnxruntime.sh --gpu` installs:
# onnxruntime-node 1.29.0's CUDA-built core with the CUDA EP library beside it (all ten).
set -u
L=/tmp/ortgpu/lib
mkdir -p $L
[ -f $L/libonnxruntime.so.1.29.0 ] || xz -dc .device/ortnode/core.xz > $L/libonnxruntime.so.1.29.0
ln -sf libonnxruntime.so.1.29.0 $L/libonnxruntime.so.1; ln -sf libonnxruntime.so.1 $L/libonnxruntime.so
for f in "$(dirname "$ORTFLEET_CUDA_EP")"/libonnxruntime_providers_*.so; do cp -f "$f" $L/; done
echo "== CPU-only core (the device's)"
bash tests/corpus/run_corpus.sh "$ORTFLEET" "$MODELS" 0; echo "rc=$?"
echo "== CUDA-built core (the --gpu layout)"
env -u ORTFLEET_CUDA_EP ORTFLEET_ORT_ROOT=/tmp/ortgpu ORTFLEET_ORT_LIB=$L/libonnxruntime.so.1 "$ORTFLEET" doctor 2>&1 | grep -iE "runtime|cuda-ep|ort-core" | cut -c1-250
env -u ORTFLEET_CUDA_EP ORTFLEET_ORT_ROOT=/tmp/ortgpu ORTFLEET_ORT_LIB=$L/libonnxruntime.so.1 bash tests/corpus/run_corpus.sh "$ORTFLEET" "$MODELS" 0; echo "rc=$?"
