#!/usr/bin/env bash
# measure.sh ORTFLEET: issue 52's targets for profile on this project's 2-core build VM (no GPU). Five
# rounds, each a `profile --json` of a small model (the MLP, 9 nodes; a ResNet-18 at 64 x 64) and an
# `ortfleet start --json` of it (sequential, as profile's child starts), interleaved; summary.txt sets
# profile's ONNX Runtime load against the timeline's runtime.load of the same run and against the
# starts', and gives "ortfleet set-up"'s share of the start. Then one profile and one bench as a
# person reads them (profile-*.txt, bench-mlp.txt).
set -euo pipefail
bin=$1
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ORTFLEET_CACHE=$work/cache ORTFLEET_AUTO_POOL=0
"$bin" -q synth mlp "$work/mlp.onnx"
"$bin" -q synth resnet "$work/resnet18.onnx" --depth 18 --image-size 64
for round in 1 2 3 4 5; do
  for model in mlp resnet18; do
    "$bin" -q profile "$work/$model.onnx" --devices cpu --runs 3 --shape-switch-seconds 0 --json >"$out/profile-$model-$round.json"
    "$bin" -q start "$work/$model.onnx" --devices cpu --strategy sequential --json >"$out/start-$model-$round.json"
  done
done
/usr/bin/python3 - "$out" >"$out/summary.txt" <<'PY'
import json, statistics, sys
out = sys.argv[1]
for model in ("mlp", "resnet18"):
    print(f"{model}: round, profile's ORT load, the same run's timeline runtime.load, ratio, a start's runtime.load, "
          "ortfleet set-up, its share of the cold start, the cold start")
    ratios, shares, loads, start_loads = [], [], [], []
    for round in range(1, 6):
        p = json.load(open(f"{out}/profile-{model}-{round}.json"))
        s = json.load(open(f"{out}/start-{model}-{round}.json"))
        phase = {x["name"]: x for x in p["phases"] if not x["parent"]}
        timeline = next(e["duration_ms"] for e in p["timeline"]["events"] if e["name"] == "runtime.load")
        start = next(e["duration_ms"] for e in s["timeline"]["events"] if e["name"] == "runtime.load")
        load, setup = phase["runtime.load"]["ms"], phase.get("tool.setup", {"ms": 0.0, "share": 0.0})
        ratios.append(load / timeline); shares.append(setup["share"]); loads.append(load); start_loads.append(start)
        print(f"  {round}  {load:7.1f} ms  {timeline:7.1f} ms  {load / timeline:.3f}  {start:7.1f} ms  "
              f"{setup['ms']:6.1f} ms  {setup['share'] * 100:5.1f}%  {p['wall_ms']:7.1f} ms")
    print(f"  median: ORT load {statistics.median(loads):.1f} ms in profile, {statistics.median(start_loads):.1f} ms in the starts "
          f"({statistics.median(loads) / statistics.median(start_loads):.2f}x); set-up {statistics.median(shares) * 100:.1f}% of the "
          f"cold start (largest {max(shares) * 100:.1f}%)")
PY
"$bin" profile "$work/mlp.onnx" --devices cpu --runs 3 --shape-switch-seconds 0 >"$out/profile-mlp.txt" 2>/dev/null
"$bin" profile "$work/resnet18.onnx" --devices cpu --runs 3 --shape-switch-seconds 0 >"$out/profile-resnet18.txt" 2>/dev/null
"$bin" bench "$work/mlp.onnx" --devices cpu*2 --no-anchors >"$out/bench-mlp.txt" 2>"$out/bench-mlp.err"
