#!/usr/bin/env bash
# A build runs wherever it is copied, moved or installed: ONNX Runtime, the worker and the data files
# are found relative to the binaries (cmake/OrtfleetRelocatable.cmake), not at the absolute paths of
# the checkout it was built in.
# Usage: relocated.sh MODE BUILD_DIR SOURCE_DIR MODEL [PYTHON]
#   copied-checkout   the checkout's .deps/ and build tree copied elsewhere, as `cp -a` of a clone does
#   moved-build       the build tree alone, somewhere else (no .deps/ beside it)
#   installed-prefix  `cmake --install BUILD_DIR --prefix P`
# Then, in a private mount namespace where the original checkout's .deps/ and the build tree's bin/,
# lib/, share/ and python/ are empty folders (nothing of the original can be found there), and with
# no ORTFLEET_ORT_* or ORTFLEET_WORKER set:
#   - `ortfleet doctor --json` exits 0 with ONNX Runtime loaded from inside the copy;
#   - `ortfleet start MODEL --devices cpu --strategy processes` starts a worker process (the copy's
#     ortfleet-worker) and its session is ready;
#   - with PYTHON (not for the prefix, which holds no Python package), `import ortfleet` from the
#     copy's python/ loads ONNX Runtime from inside the copy;
#   - the node daemon's systemd unit starts the copy's binary: the one `cmake --install` wrote in
#     share/systemd/user (ExecStart=P/bin/ortfleet, not the configured default prefix's), and the one
#     `ortfleet serve --print-unit` prints (a path with a space and a % quoted and escaped as systemd reads it).
# Exits 77 (skipped) where the machine refuses a private mount namespace (unshare -rm).
set -euo pipefail
mode=$1 build=$(cd "$2" && pwd) source=$(cd "$3" && pwd) model=$4 python=${5:-}
fail() { echo "relocated.sh ($mode): $*" >&2; exit 1; }
if ! command -v unshare >/dev/null || ! unshare -rm true 2>/dev/null; then
  echo "relocated.sh: skipped: hiding the original needs a private mount namespace (unshare -rm), which this machine refuses" >&2
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ortfleet-relocated.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
copy_build() {  # the build tree's parts that run: what a copy of build/ carries
  mkdir -p "$1"
  cp -a "$build/bin" "$1/"
  for d in lib share; do if [ -d "$build/$d" ]; then cp -a "$build/$d" "$1/"; fi; done
  if [ -n "$python" ] && [ -d "$build/python/ortfleet" ]; then mkdir -p "$1/python" && cp -a "$build/python/ortfleet" "$1/python/"; fi
}
case "$mode" in
  copied-checkout)
    top=$tmp/checkout
    mkdir -p "$top/.deps"
    cp -a "$source/.deps/onnxruntime" "$top/.deps/"
    if [ -d "$source/.deps/web" ]; then cp -a "$source/.deps/web" "$top/.deps/"; fi
    copy_build "$top/build/release"
    bin=$top/build/release/bin pythonpath=$top/build/release/python ;;
  moved-build)
    top=$tmp/elsewhere/release
    copy_build "$top"
    bin=$top/bin pythonpath=$top/python ;;
  installed-prefix)
    top=$tmp/prefix
    cmake --install "$build" --prefix "$top" >/dev/null
    bin=$top/bin pythonpath= ;;
  *) fail "unknown mode (copied-checkout, moved-build or installed-prefix)" ;;
esac
[ -f "$model" ] || fail "no model at $model"
cp "$model" "$tmp/model.onnx"

# The original's folders, hidden behind empty ones, for each command run below.
empty=$tmp/empty
mkdir -p "$empty"
hidden=()
for d in "$source/.deps" "$build/bin" "$build/lib" "$build/share" "$build/python"; do [ -d "$d" ] && hidden+=("$d"); done
hide() {
  local mounts=""
  for d in "${hidden[@]}"; do mounts+="mount --bind '$empty' '$d' && "; done
  env -u ORTFLEET_ORT_LIB -u ORTFLEET_ORT_ROOT -u ORTFLEET_WORKER -u ORTFLEET_BUILD_DIR -u PYTHONPATH \
    ORTFLEET_CACHE="$tmp/cache" ORTFLEET_AUTO_POOL=0 XDG_RUNTIME_DIR="$tmp" \
    unshare -rm sh -c "$mounts exec \"\$@\"" sh "$@"
}
for d in "${hidden[@]}"; do
  [ -z "$(hide ls -A "$d")" ] || fail "$d is not hidden"
done

doctor=$(hide "$bin/ortfleet" doctor --json --no-register) || fail "ortfleet doctor failed (exit $?): $doctor"
# runtime.path of the report: its keys are sorted, so "path" follows "loaded" in the runtime's object.
loaded=$(printf '%s\n' "$doctor" | grep -A1 '^  *"loaded": true' | sed -n 's/^ *"path": "\([^"]*\)",*$/\1/p' | head -n 1)
case "$loaded" in
  "$top"/*) echo "doctor: ONNX Runtime from $loaded" ;;
  *) fail "ortfleet doctor loaded ONNX Runtime from '${loaded:-nowhere}', not from inside $top" ;;
esac

start=$(cd "$tmp" && hide "$bin/ortfleet" start model.onnx --devices cpu --strategy processes --json 2>&1) ||
  fail "ortfleet start with a worker process failed: $start"
printf '%s' "$start" | grep -q '"state": "ready"' || fail "the worker's session was not ready: $start"
echo "start: a worker process of the copy, ready"

# The node daemon's unit starts this copy's binary.
exec_start() { sed -n 's/^ExecStart=//p' "$1"; }
if [ "$mode" = installed-prefix ]; then
  unit=$top/share/systemd/user/ortfleet.service
  [ -f "$unit" ] || fail "cmake --install wrote no systemd unit at $unit"
  [ "$(exec_start "$unit")" = "$top/bin/ortfleet serve --devices all --idle-exit 0" ] ||
    fail "the installed unit starts '$(exec_start "$unit")', not $top/bin/ortfleet"
fi
hide "$bin/ortfleet" serve --print-unit >"$tmp/printed.service" || fail "ortfleet serve --print-unit failed"
[ "$(exec_start "$tmp/printed.service")" = "$(cd "$bin" && pwd -P)/ortfleet serve --devices all --idle-exit 0" ] ||
  fail "serve --print-unit's unit starts '$(exec_start "$tmp/printed.service")', not $bin/ortfleet"
grep -q '^WantedBy=default.target' "$tmp/printed.service" || fail "serve --print-unit printed no whole unit: $(cat "$tmp/printed.service")"
mkdir -p "$tmp/a b%"
cp "$bin/ortfleet" "$tmp/a b%/ortfleet"
odd=$(cd "$tmp/a b%" && pwd -P)
[ "$(hide "$tmp/a b%/ortfleet" serve --print-unit | sed -n 's/^ExecStart=//p')" = "\"${odd//%/%%}/ortfleet\" serve --devices all --idle-exit 0" ] ||
  fail "a binary in '$odd' printed ExecStart=$(hide "$tmp/a b%/ortfleet" serve --print-unit | sed -n 's/^ExecStart=//p')"
echo "systemd: the unit starts $bin/ortfleet"

if [ -n "$pythonpath" ]; then
  path=$(cd "$tmp" && hide env PYTHONPATH="$pythonpath" "$python" -c "import ortfleet; print(ortfleet.load_runtime()['path'])") ||
    fail "import ortfleet from $pythonpath failed: $path"
  case "$path" in
    "$top"/*) echo "python: ONNX Runtime from $path" ;;
    *) fail "the Python package loaded ONNX Runtime from '$path', not from inside $top" ;;
  esac
fi
echo "relocated.sh ($mode): ok"
