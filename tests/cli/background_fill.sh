#!/usr/bin/env bash
# background_fill.sh ORTFLEET MODEL: the model cache entry a first start misses is made after ready,
# off its path, and a job that ends first leaves nothing of it: the start (no warm pool) says it makes
# the entry in the background; killed while the background worker is busy (the test holds the worker's
# start back), no worker stays and no file of an unfinished entry either. Left to finish, the next
# start loads the entry.
set -uo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
export ORTFLEET_CACHE=$dir/cache ORTFLEET_AUTO_POOL=0
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
await() { for _ in $(seq 1 "$2"); do eval "$1" && return 0; sleep 0.1; done; return 1; }
workers() { pgrep -f "ortfleet-worker --channel-fd" | while read -r p; do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "ORTFLEET_CACHE=$ORTFLEET_CACHE" && echo "$p"; done; }

ORTFLEET_TEST_WORKER_START_DELAY=cpu=60 "$cli" start "$model" --devices cpu >"$dir/job.out" 2>"$dir/job.err" &
job=$!
await 'grep -q "making the model cache entry" "$dir/job.err"' 600 || fail "the start did not say it makes the entry in the background: $(cat "$dir/job.err")"
grep -q "every device ready" "$dir/job.out" || fail "the start printed no ready report before its background work"
[ -n "$(workers)" ] || fail "no background worker runs"
kill -9 "$job"
wait "$job" 2>/dev/null
await '[ -z "$(workers)" ]' 100 || fail "the background worker $(workers) outlived the job"
for f in "$ORTFLEET_CACHE"/models/*; do
  case "$f" in *.lock|*.digests.json) ;; *) fail "$f was left behind by the killed job";; esac
done

"$cli" start "$model" --devices cpu >/dev/null 2>"$dir/fill.err" || fail "the start failed: $(cat "$dir/fill.err")"
grep -q "made the model cache entry" "$dir/fill.err" || fail "the entry was not made: $(cat "$dir/fill.err")"
"$cli" start "$model" --devices cpu --json >"$dir/hit.json" 2>/dev/null || fail "the third start failed"
grep -Eq '"model_cache": "(hit|no-gain)"' "$dir/hit.json" || fail "the third start did not find the entry: $(grep model_cache "$dir/hit.json")"
echo "ok: the entry is made after ready; a job killed first leaves no worker and no unfinished entry"
