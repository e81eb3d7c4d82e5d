#!/usr/bin/env bash
# measure.sh ORTFLEET [OUT]: issue 52's check of tune on this project's 2-core build VM (no GPU): three
# runs of `ortfleet tune` (the default sweep, its default rounds and --budget) on one small transformer,
# each asked to write its start-fast and serve-fast configs. Each run's text, JSON and any config it
# wrote land in OUT, by default beside this script (tune-N.txt, tune-N.json, start-fast-N.json,
# serve-fast-N.json). cpu-tune-repeat-2 is this script's run into that folder, after tune's fix.
set -euo pipefail
bin=$1
out=$(cd "${2:-$(dirname "$0")}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ORTFLEET_CACHE=$work/cache ORTFLEET_AUTO_POOL=0
"$bin" -q synth transformer "$work/transformer.onnx" --layers 4 --hidden 256 --heads 4 --vocabulary 4000 --sequence 64
for run in 1 2 3; do
  rm -f "$out/start-fast-$run.json" "$out/serve-fast-$run.json"
  /usr/bin/time -f "run $run: %e s" "$bin" tune "$work/transformer.onnx" --devices cpu \
    --write-config "$out/start-fast-$run.json" --write-serve-config "$out/serve-fast-$run.json" \
    --export-json "$out/tune-$run.json" >"$out/tune-$run.txt" 2>"$out/tune-$run.err"
done
