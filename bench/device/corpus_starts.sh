#!/usr/bin/env bash
# corpus_starts.sh ORTFLEET MODELS_DIR DEVICE OUT_DIR: `ortfleet bench --strategies fleet` of every model of
# the real-model corpus (tests/corpus/models.json, with its documented warm-up flags) on DEVICE: the
# fleet's first start on an empty cache, its cached start and its start without the cache, side by side
# (the bench's notes), five rounds each, no anchors, no pool rows. One file per model in OUT_DIR.
set -u
bin=$1 models=$2 device=$3 out=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export ORTFLEET_AUTO_POOL=0
/usr/bin/python3 -c "
import json, sys
for m in json.load(open(sys.argv[1]))['models']:
    print(m['name'], ' '.join(m['warmup']))" "$root/tests/corpus/models.json" | while read -r name flags; do
  # shellcheck disable=SC2086
  ORTFLEET_CACHE=$(mktemp -d) "$bin" bench "$models/$name.onnx" --devices "$device" --strategies fleet --no-anchors --no-pool $flags \
    > "$out/$name.txt" 2>&1
  echo "$name: $(grep -E "^first start on an empty cache|^cached start" "$out/$name.txt" | tr '\n' ' ')"
done
