#!/usr/bin/env bash
# Fetches ONNX Runtime 1.29.0 for Linux x64 from the npm registry into .deps/onnxruntime (or DIR):
#   include/  the C and C++ API headers (com.github.asus4.onnxruntime 0.4.9)
#   lib/      libonnxruntime.so.1 (.so.1.29.0, with the libonnxruntime.so link) and
#             libonnxruntime_providers_shared.so. The core library is
#             - without a GPU: the CPU-only build of com.github.asus4.onnxruntime 0.4.9;
#             - where a GPU is present or --gpu is given: the CUDA-enabled build of onnxruntime-node
#               1.29.0 (only its libonnxruntime.so.1 is taken; none of its install scripts run), with
#               libonnxruntime_providers_cuda.so (CUDA 13) of com.github.asus4.onnxruntime.linux-x64-gpu
#               beside it, in the folder from which that core loads its CUDA EP. The CPU-only core
#               crashes (SIGSEGV) in CUDA kernels that call back into it (Resize, Slice, If, Concat...).
# Downloads are cached (ORTFLEET_CACHE, default ~/.cache/ortfleet) and checked against pinned SHA-256s.
# Usage: scripts/fetch-onnxruntime.sh [--gpu | --no-gpu] [--dest DIR]
#        (default: the GPU layout only if a GPU is seen; DIR defaults to the checkout's .deps/onnxruntime)
set -euo pipefail

VERSION=0.4.9   # npm package version; it carries ONNX Runtime 1.29.0
CORE_PKG=com.github.asus4.onnxruntime
GPU_PKG=com.github.asus4.onnxruntime.linux-x64-gpu
CORE_SHA256=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
GPU_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
HEADERS='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'
# The CUDA-enabled core of the GPU layout (the tarball is 111 MB; the library 44.7 MB).
NODE_PKG=onnxruntime-node
NODE_VERSION=1.29.0
NODE_SHA256=cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037
NODE_CORE=package/bin/napi-v6/linux/x64/libonnxruntime.so.1
NODE_CORE_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/onnxruntime"
cache="${ORTFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ortfleet}/npm"

usage() { echo "usage: $0 [--gpu | --no-gpu] [--dest DIR]" >&2; exit 2; }
want_gpu=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) want_gpu=yes ;;
    --no-gpu) want_gpu=no ;;
    --dest) [ $# -ge 2 ] || usage; dest=$2; shift ;;
    *) usage ;;
  esac
  shift
done
if [ "$want_gpu" = auto ]; then
  if [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; then want_gpu=yes; else want_gpu=no; fi
fi
dest=$(mkdir -p "$(dirname "$dest")" && cd "$(dirname "$dest")" && pwd)/$(basename "$dest")

say() { echo "fetch-onnxruntime: $*" >&2; }

# shellcheck source=lib/npm-fetch.sh
source "$root/scripts/lib/npm-fetch.sh"
fetch() { npm_fetch "$1" "$VERSION" "$2" "$cache"; }

# The GPU stamp names the core's package, so a GPU layout fetched with the CPU-only core is replaced.
if [ "$want_gpu" = yes ]; then stamp=".fetched-$VERSION-gpu-yes-core-$NODE_PKG-$NODE_VERSION"
else stamp=".fetched-$VERSION-gpu-no"; fi
if [ -f "$dest/$stamp" ] || { [ "$want_gpu" = no ] && compgen -G "$dest/.fetched-$VERSION-gpu-yes*" >/dev/null; }; then
  say "ONNX Runtime 1.29.0 already in $dest"; exit 0
fi
if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ] && ! compgen -G "$dest/.fetched-*" >/dev/null; then
  say "$dest is not empty and was not made by this script; not replacing it"; exit 1
fi

# Everything is assembled in a folder beside $dest and moved into place at the end, so a failed
# download leaves the previous copy as it was.
tmp=$(mktemp -d); stage="$dest.partial.$$"
trap 'rm -rf "$tmp" "$stage"' EXIT
mkdir -p "$stage/include" "$stage/lib"
core=$(fetch $CORE_PKG $CORE_SHA256)
tar xzf "$core" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime.so \
  package/Plugins/Linux/x64/libonnxruntime_providers_shared.so "$HEADERS"
cp "$tmp/$HEADERS"/*.h "$stage/include/"
cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_shared.so" "$stage/lib/"
if [ "$want_gpu" = yes ]; then
  gpu=$(fetch $GPU_PKG $GPU_SHA256)
  tar xzf "$gpu" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so" "$stage/lib/"
  node=$(npm_fetch $NODE_PKG $NODE_VERSION $NODE_SHA256 "$cache")
  tar xzf "$node" -C "$tmp" "$NODE_CORE"
  if ! echo "$NODE_CORE_SHA256  $tmp/$NODE_CORE" | sha256sum --check --status; then
    say "checksum mismatch for $NODE_CORE in $node: expected $NODE_CORE_SHA256"; exit 1
  fi
  cp "$tmp/$NODE_CORE" "$stage/lib/libonnxruntime.so.1.29.0"
  core_from="$NODE_PKG@$NODE_VERSION, CUDA-enabled"
else
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime.so" "$stage/lib/libonnxruntime.so.1.29.0"
  core_from="$CORE_PKG@$VERSION, CPU-only"
fi
ln -s libonnxruntime.so.1.29.0 "$stage/lib/libonnxruntime.so.1"
ln -s libonnxruntime.so.1 "$stage/lib/libonnxruntime.so"
touch "$stage/$stamp"
rm -rf "$dest" && mv "$stage" "$dest"
say "ONNX Runtime 1.29.0 ready in $dest (core: $core_from; CUDA provider: $want_gpu)"
