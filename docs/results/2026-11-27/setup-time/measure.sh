#!/usr/bin/env bash
# Times README's first command on a fresh clone, as a new user meets it: ccache off, npm's cache warm
# (~/.cache/ortfleet/npm; --empty-npm-cache: a new, empty one, as issue 46 counts), the Debian packages
# installed. Writes into OUT_DIR: bootstrap.txt (the
# command's output and `time`), ninja_log.txt (.ninja_log) and slowest.txt (the 15 slowest steps).
# Usage: measure.sh SOURCE_REPO COMMIT OUT_DIR [--bench] [--after] [--empty-npm-cache]
#   --bench also times `build/release/bin/ortfleet bench` right after, as README's first command does;
#   --after (a commit where the set-up builds no tests) also records ctest on the unbuilt test programs
#   (not_built.txt: it must fail) and times `pip install .` beside the built tree (pip.txt).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 SOURCE_REPO COMMIT OUT_DIR [--bench]" >&2; exit 2; }
src=$1 commit=$2 out=$(mkdir -p "$3" && cd "$3" && pwd); shift 3
bench=no after=no
for a in "$@"; do
  case "$a" in
    --bench) bench=yes ;;
    --after) after=yes ;;
    --empty-npm-cache) XDG_CACHE_HOME=$(mktemp -d /tmp/empty-cache-XXXXXX); export XDG_CACHE_HOME npm_config_cache=$XDG_CACHE_HOME/npm-cli ;;
    *) echo "unknown $a" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
clone=$(mktemp -d /tmp/clone-XXXXXX)
git clone -q "$src" "$clone" && git -C "$clone" checkout -q "$commit"
unset CMAKE_CXX_COMPILER_LAUNCHER
export CCACHE_DISABLE=1
cd "$clone"
{ echo "commit $(git rev-parse --short HEAD), $(nproc) cores, npm cache: ${XDG_CACHE_HOME:-warm}, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  { time scripts/bootstrap.sh; } 2>&1
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$out/bootstrap.txt" 2>&1
cp build/release/.ninja_log "$out/ninja_log.txt"
"$here/slowest-steps.sh" build/release/.ninja_log 15 > "$out/slowest.txt"
if [ "$bench" = yes ]; then
  { { time build/release/bin/ortfleet bench; } 2>&1; } > "$out/bench.txt" 2>&1
fi
if [ "$after" = yes ]; then
  { ctest --preset release -R '_NOT_BUILT$'; echo "ctest exit status: $?"; } > "$out/not_built.txt" 2>&1 || true
  { { time /usr/bin/python3 -m pip install -q --no-deps --target "$clone/site" .; } 2>&1
    ls -l "$clone/site/ortfleet/lib/onnxruntime"; } > "$out/pip.txt" 2>&1
fi
rm -rf "$clone"
