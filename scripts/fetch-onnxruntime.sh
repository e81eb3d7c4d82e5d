#!/usr/bin/env bash
# Fetches ONNX Runtime 1.29.0 for Linux x64 from the npm registry into .deps/onnxruntime:
#   include/  the C and C++ API headers
#   lib/      libonnxruntime.so.1 (a CPU build that loads the CUDA EP as a plugin library) and,
#             where a GPU is present or --gpu is given, libonnxruntime_providers_cuda.so (CUDA 13).
# Downloads are cached (ORTFLEET_CACHE, default ~/.cache/ortfleet) and checked against pinned SHA-256s.
# Usage: scripts/fetch-onnxruntime.sh [--gpu | --no-gpu]      (default: GPU package only if a GPU is seen)
set -euo pipefail

VERSION=0.4.9   # npm package version; it carries ONNX Runtime 1.29.0
CORE_PKG=com.github.asus4.onnxruntime
GPU_PKG=com.github.asus4.onnxruntime.linux-x64-gpu
CORE_SHA256=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
GPU_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
HEADERS='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/onnxruntime"
cache="${ORTFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ortfleet}/npm"

want_gpu=auto
case "${1:-}" in
  --gpu) want_gpu=yes ;;
  --no-gpu) want_gpu=no ;;
  "") ;;
  *) echo "usage: $0 [--gpu | --no-gpu]" >&2; exit 2 ;;
esac
if [ "$want_gpu" = auto ]; then
  if [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; then want_gpu=yes; else want_gpu=no; fi
fi

say() { echo "fetch-onnxruntime: $*" >&2; }

# shellcheck source=lib/npm-fetch.sh
source "$root/scripts/lib/npm-fetch.sh"
fetch() { npm_fetch "$1" "$VERSION" "$2" "$cache"; }

stamp="$dest/.fetched-$VERSION-gpu-$want_gpu"
if [ -f "$stamp" ] || { [ "$want_gpu" = no ] && [ -f "$dest/.fetched-$VERSION-gpu-yes" ]; }; then
  say "ONNX Runtime 1.29.0 already in $dest"; exit 0
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
core=$(fetch $CORE_PKG $CORE_SHA256)
tar xzf "$core" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime.so \
  package/Plugins/Linux/x64/libonnxruntime_providers_shared.so "$HEADERS"
rm -rf "$dest" && mkdir -p "$dest/include" "$dest/lib"
cp "$tmp/$HEADERS"/*.h "$dest/include/"
cp "$tmp/package/Plugins/Linux/x64/libonnxruntime.so" "$dest/lib/libonnxruntime.so.1.29.0"
ln -s libonnxruntime.so.1.29.0 "$dest/lib/libonnxruntime.so.1"
ln -s libonnxruntime.so.1 "$dest/lib/libonnxruntime.so"
cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_shared.so" "$dest/lib/"
if [ "$want_gpu" = yes ]; then
  gpu=$(fetch $GPU_PKG $GPU_SHA256)
  tar xzf "$gpu" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so" "$dest/lib/"
fi
touch "$stamp"
say "ONNX Runtime 1.29.0 ready in $dest (CUDA provider: $want_gpu)"
