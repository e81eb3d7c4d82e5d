#!/usr/bin/env bash
# shared_cache.sh ORTFLEET MODEL: the read-only shared layer of the model cache (ORTFLEET_CACHE_SHARED)
# under many readers at once, as on a cluster file system: a layer made with `cache import --shared`,
# then 8 starts at once, each with a local cache of its own: every one a hit from the shared layer,
# nothing written in the layer (every file's bytes, size and times as before, no new file), nothing
# made in the local caches but remembered hashes. `cache list` shows the layer.
set -uo pipefail
cli=$1 model=$2
readers=${3:-8}
dir=$(mktemp -d)
export ORTFLEET_AUTO_POOL=0
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
state() { (cd "$dir/shared" && find . -printf '%p %y %s %m %T@ %C@\n' | sort && find . -type f -exec sha1sum {} + | sort); }

ORTFLEET_CACHE=$dir/maker "$cli" start "$model" --devices cpu --model-cache-fill inline >/dev/null 2>&1 || fail "the entry was not made"
ORTFLEET_CACHE=$dir/maker "$cli" -q cache export "$model" --out "$dir/model.ortfleet" >/dev/null || fail "export failed"
"$cli" cache import "$dir/model.ortfleet" --shared "$dir/shared" >"$dir/import.out" 2>&1 || fail "import --shared failed: $(cat "$dir/import.out")"
chmod -R a-w "$dir/shared"   # as a read-only mount would be
before=$(state)

export ORTFLEET_CACHE_SHARED=$dir/shared
pids=()
for i in $(seq 1 "$readers"); do
  ORTFLEET_CACHE=$dir/local-$i "$cli" --json start "$model" --devices cpu >"$dir/start-$i.json" 2>"$dir/start-$i.err" &
  pids+=($!)
done
for i in $(seq 1 "$readers"); do
  wait "${pids[$((i - 1))]}" || fail "start $i failed: $(cat "$dir/start-$i.err")"
done
for i in $(seq 1 "$readers"); do
  grep -q '"model_cache": "hit"' "$dir/start-$i.json" || fail "start $i was no hit: $(grep model_cache "$dir/start-$i.json") $(cat "$dir/start-$i.err")"
  grep -q "\"model_cache_note\": \"from the shared layer $dir/shared\"" "$dir/start-$i.json" || fail "start $i did not load from the shared layer"
  for f in "$dir/local-$i"/models/*; do
    case "$f" in *.digests.json) ;; *) fail "start $i wrote $f into its local cache";; esac
  done
done
[ "$(state)" = "$before" ] || fail "the shared layer changed under its readers: $(diff <(echo "$before") <(state))"
ORTFLEET_CACHE=$dir/local-1 "$cli" cache list | grep -q "^shared layer $dir/shared (read-only, looked in first): 1 cached model" ||
  fail "cache list does not show the shared layer: $(ORTFLEET_CACHE=$dir/local-1 "$cli" cache list)"
chmod -R u+w "$dir/shared"
echo "ok: $readers starts at once, every one a hit from the shared layer, which nobody wrote"
