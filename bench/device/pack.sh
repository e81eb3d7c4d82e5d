#!/usr/bin/env bash
# pack.sh BUILD_DIR: packs what a GPU run needs of this machine's build into .device/ortfleet/ (ignored by
# git), small enough to travel beside a part of ONNX Runtime in one device call: the stripped ortfleet,
# ortfleet-worker and ortfleet_gpu_tests, an install tree (for building the Python extension there:
# ORTFLEET_PREFIX), and the corpus models a plan names (.deps/models). On the device, unpack.sh lays it
# out under /tmp/ortfleet-build/{bin,prefix,models}.
set -euo pipefail
build=${1:-build/release}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/.device/ortfleet stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
exclude=$(git -C "$root" rev-parse --path-format=absolute --git-path info/exclude)  # a worktree's .git is a file
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
mkdir -p "$out" "$stage/bin" "$stage/models"
for f in ortfleet ortfleet-worker ortfleet_gpu_tests libortfleet_cudnn.so; do cp "$build/bin/$f" "$stage/bin/" && strip -s "$stage/bin/$f"; done
cmake --install "$build" --prefix "$stage/prefix" >/dev/null
cp "$root"/.deps/models/ppocrv4_*.onnx "$stage/models/" 2>/dev/null || true
tar cf - -C "$stage" bin prefix models | zstd -q -10 -T0 > "$out/ortfleet.tar.zst"
cp "$(dirname "$0")/unpack.sh" "$out/"
du -sh "$out"
