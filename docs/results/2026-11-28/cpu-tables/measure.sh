#!/usr/bin/env bash
# measure.sh ORTFLEET: issue 52's tables as a pipe gets them, on this project's 2-core build VM (no GPU):
# ResNet-50's cache entry exported (the example of docs/serving.md) and `ortfleet doctor MODEL`, each
# piped into a file; then tests/cli/tables.py (bench, tune, profile, cache export, pool status) on the MLP.
set -euo pipefail
bin=$1
out=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$out/../../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ORTFLEET_CACHE=$work/cache ORTFLEET_AUTO_POOL=0
cd "$work"
"$bin" -q synth resnet resnet50.onnx
"$bin" -q start resnet50.onnx --devices cpu >/dev/null  # its entry made after ready, and priced
"$bin" cache export resnet50.onnx --out resnet50.ortfleet >"$out/cache-export.txt"
"$bin" doctor resnet50.onnx --device cpu >"$out/doctor-model.txt"
"$bin" -q synth mlp mlp.onnx
python3 "$source_dir/tests/cli/tables.py" "$bin" "$work/mlp.onnx" "$work/tables" >"$out/tables.txt"
