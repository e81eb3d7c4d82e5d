#!/usr/bin/env bash
# cache_bundle.sh ORTFLEET MODEL: a model's cache entry carried to another machine in a bundle, as a
# user meets it. "Machine A" and "machine B" are two fresh caches: A's first start makes the entry,
# `cache export` writes the bundle, B's `cache import` adds it, and B's first start is a hit. A bundle
# cut short or not a bundle at all is refused with one line and exit 1, B's cache as it was; an import
# killed halfway (before and while it publishes) leaves no partial entry, and the next import cleans up.
set -uo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
export ORTFLEET_AUTO_POOL=0
unset ORTFLEET_CACHE_SHARED
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
on() { local machine=$1; shift; ORTFLEET_CACHE=$dir/$machine "$cli" "$@"; }
state() { (cd "$dir/B" 2>/dev/null && find . -type f -printf '%p %s %C@\n' | sort | xargs -r -n3 sh -c 'echo "$0 $1 $2 $(sha1sum < "$0")"'); }

# A: the first start makes the entry (inline: unpriced, so used wherever it loads).
on A start "$model" --devices cpu --model-cache-fill inline >/dev/null 2>"$dir/a.err" || fail "A's start failed: $(cat "$dir/a.err")"
on A cache export "$model" --out "$dir/model.ortfleet" >"$dir/export.out" 2>&1 || fail "export failed: $(cat "$dir/export.out")"
grep -q "^exported 1 entry to $dir/model.ortfleet" "$dir/export.out" || fail "export says: $(cat "$dir/export.out")"
# sed, not head: head leaves as soon as it has a line, and tar, still writing, dies of SIGPIPE (pipefail).
[ "$(tar tf "$dir/model.ortfleet" | sed -n 1p)" = "ortfleet-bundle.json" ] || fail "the bundle's first member is not its manifest: $(tar tf "$dir/model.ortfleet")"
on A cache export "$dir/none.onnx" --out "$dir/x" >/dev/null 2>&1 && fail "exporting a model that does not exist succeeded"

# B: nothing yet; a bundle that is no bundle, or is cut short, is refused and changes nothing.
on B cache list >/dev/null || fail "cache list on B failed"
before=$(state)
head -c 3000 "$dir/model.ortfleet" >"$dir/cut.ortfleet"
echo "my notes" >"$dir/notes.ortfleet"
for bad in cut notes; do
  on B cache import "$dir/$bad.ortfleet" >"$dir/$bad.out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || fail "importing $bad.ortfleet exited $rc: $(cat "$dir/$bad.out")"
  [ "$(wc -l <"$dir/$bad.out")" -eq 1 ] || fail "the refusal of $bad.ortfleet is not one line: $(cat "$dir/$bad.out")"
  grep -q "^ortfleet: error: refused the bundle $dir/$bad.ortfleet: " "$dir/$bad.out" || fail "refusal of $bad: $(cat "$dir/$bad.out")"
  [ "$(state)" = "$before" ] || fail "the refused $bad.ortfleet changed B's cache"
done
grep -q "truncated" "$dir/cut.out" || fail "the cut bundle is not called truncated: $(cat "$dir/cut.out")"

# Killed after every check, before anything was published; then killed while publishing.
for point in staged publishing; do
  ORTFLEET_TEST_IMPORT_KILL_AT=$point on B cache import "$dir/model.ortfleet" >/dev/null 2>&1
  rc=$?
  [ "$rc" -eq 137 ] || fail "the import meant to be killed at $point exited $rc"
  on B --json cache list | grep -q '"entries": \[\]' || fail "killed at $point, the import left an entry: $(on B cache list)"
  find "$dir/B/models" -maxdepth 1 -type f \( -name '*.onnx' -o -name '*.ort' \) | grep -q . && fail "killed at $point, a graph was published"
done
# (The second was killed with the entry's weights and manifest in place: an entry without its graph.)
ls "$dir"/B/models/*.manifest.json >/dev/null 2>&1 || fail "the import killed while publishing had published nothing yet"

on B --json start "$model" --devices cpu --model-cache-fill off >"$dir/off.json" 2>"$dir/off.err" || fail "a start after the killed imports failed"
grep -q "damaged" "$dir/off.err" && fail "what the killed import left looked like a damaged entry: $(cat "$dir/off.err")"

# The import proper: checked, added, and the leftovers of the killed ones gone.
on B cache import "$dir/model.ortfleet" >"$dir/import.out" 2>&1 || fail "import failed: $(cat "$dir/import.out")"
grep -q "^imported 1 of 1 entry from $dir/model.ortfleet (ortfleet " "$dir/import.out" || fail "import says: $(cat "$dir/import.out")"
find "$dir/B" -name '.import-*' | grep -q . && fail "staging folders were left: $(find "$dir/B" -name '.import-*')"
on B --json start "$model" --devices cpu >"$dir/b.json" 2>"$dir/b.err" || fail "B's first start failed: $(cat "$dir/b.err")"
grep -q '"model_cache": "hit"' "$dir/b.json" || fail "B's first start was no cache hit: $(grep model_cache "$dir/b.json")"
grep -q "making the model cache entry" "$dir/b.err" && fail "B's first start made an entry of its own"
echo "ok: exported on A, imported on B, B's first start a hit; refusals leave B as it was; killed imports leave no partial entry"
