#!/usr/bin/env bash
# Fetches ONNX Runtime for Linux x64 from the npm registry into .deps/onnxruntime (or DIR):
#   include/  the C and C++ API headers of 1.29.0 (com.github.asus4.onnxruntime 0.4.9): the build
#             compiles against the oldest ONNX Runtime it supports and loads any newer one at run time
#   lib/      the core library, libonnxruntime.so.1.X.Y with its .so.1 and .so links, and
#   - 1.29.0 (the default):
#             libonnxruntime_providers_shared.so, and a core that is
#             - without a GPU: the CPU-only build of com.github.asus4.onnxruntime 0.4.9;
#             - where a GPU is present or --gpu is given: the CUDA-enabled build of onnxruntime-node
#               1.29.0 (only its libonnxruntime.so.1 is taken; none of its install scripts run), with
#               libonnxruntime_providers_cuda.so (CUDA 13) of com.github.asus4.onnxruntime.linux-x64-gpu
#               beside it, in the folder from which that core loads its CUDA EP. The CPU-only core
#               crashes (SIGSEGV) in CUDA kernels that call back into it (Resize, Slice, If, Concat...).
#   - 1.30.0 (the newest published): the core of onnxruntime-node 1.30.0 (CUDA-enabled, 45.8 MB of a
#             113 MB package), for the CPU: no CUDA provider of 1.30 is published on npm.
# Downloads are cached (ORTFLEET_CACHE, default ~/.cache/ortfleet) and checked against pinned SHA-256s.
# Usage: scripts/fetch-onnxruntime.sh [--gpu | --no-gpu] [--version 1.29.0|1.30.0] [--dest DIR]
#        (default: the GPU layout only if a GPU is seen; the version ORTFLEET_ORT_VERSION names, else
#        1.29.0; DIR defaults to the checkout's .deps/onnxruntime)
# CI runs the tests against 1.30.0 too: scripts/test-ort-version.sh 1.30.0.
set -euo pipefail

VERSION=0.4.9   # npm package version; it carries ONNX Runtime 1.29.0 (the headers, and the CPU-only core)
CORE_PKG=com.github.asus4.onnxruntime
GPU_PKG=com.github.asus4.onnxruntime.linux-x64-gpu
CORE_SHA256=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
GPU_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
HEADERS='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'
# The CUDA-enabled cores of onnxruntime-node, per ONNX Runtime version: the package's SHA-256 and the core's.
NODE_PKG=onnxruntime-node
NODE_CORE=package/bin/napi-v6/linux/x64/libonnxruntime.so.1
node_checksums() {
  case "$1" in
    1.29.0) echo cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037 89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d ;;
    1.30.0) echo 6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75 ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23 ;;
    *) return 1 ;;
  esac
}
KNOWN_VERSIONS="1.29.0, 1.30.0"

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/onnxruntime"
cache="${ORTFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ortfleet}/npm"

usage() { echo "usage: $0 [--gpu | --no-gpu] [--version 1.29.0|1.30.0] [--dest DIR]" >&2; exit 2; }
say() { echo "fetch-onnxruntime: $*" >&2; }
want_gpu=auto
ort_version=${ORTFLEET_ORT_VERSION:-1.29.0}
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) want_gpu=yes ;;
    --no-gpu) want_gpu=no ;;
    --version) [ $# -ge 2 ] || usage; ort_version=$2; shift ;;
    --dest) [ $# -ge 2 ] || usage; dest=$2; shift ;;
    *) usage ;;
  esac
  shift
done
read -r NODE_SHA256 NODE_CORE_SHA256 < <(node_checksums "$ort_version") || {
  say "ONNX Runtime $ort_version is not one this script has checksums for (it fetches $KNOWN_VERSIONS)"; exit 2; }
NODE_VERSION=$ort_version
if [ "$want_gpu" = auto ]; then
  if [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; then want_gpu=yes; else want_gpu=no; fi
  if [ "$want_gpu" = yes ] && [ "$ort_version" != 1.29.0 ]; then
    say "a GPU is present, but no CUDA provider of ONNX Runtime $ort_version is on npm: fetching its core for the CPU"
    want_gpu=no
  fi
elif [ "$want_gpu" = yes ] && [ "$ort_version" != 1.29.0 ]; then
  say "no CUDA provider of ONNX Runtime $ort_version is published on npm: --gpu fetches 1.29.0 only"; exit 2
fi
dest=$(mkdir -p "$(dirname "$dest")" && cd "$(dirname "$dest")" && pwd)/$(basename "$dest")

# shellcheck source=lib/npm-fetch.sh
source "$root/scripts/lib/npm-fetch.sh"
fetch() { npm_fetch "$1" "$VERSION" "$2" "$cache"; }

# The GPU stamp names the core's package, so a GPU layout fetched with the CPU-only core is replaced;
# a newer version's stamp names its core, so that a change of version replaces the layout.
if [ "$ort_version" != 1.29.0 ]; then stamp=".fetched-$VERSION-gpu-no-core-$NODE_PKG-$NODE_VERSION"
elif [ "$want_gpu" = yes ]; then stamp=".fetched-$VERSION-gpu-yes-core-$NODE_PKG-$NODE_VERSION"
else stamp=".fetched-$VERSION-gpu-no"; fi
if [ -f "$dest/$stamp" ] ||
   { [ "$ort_version" = 1.29.0 ] && [ "$want_gpu" = no ] && compgen -G "$dest/.fetched-$VERSION-gpu-yes*" >/dev/null; }; then
  say "ONNX Runtime $ort_version already in $dest"; exit 0
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
core_file=libonnxruntime.so.$ort_version
node_core() {  # the CUDA-enabled core of onnxruntime-node $NODE_VERSION, checked, into lib/
  local node
  node=$(npm_fetch $NODE_PKG "$NODE_VERSION" "$NODE_SHA256" "$cache")
  tar xzf "$node" -C "$tmp" "$NODE_CORE"
  if ! echo "$NODE_CORE_SHA256  $tmp/$NODE_CORE" | sha256sum --check --status; then
    say "checksum mismatch for $NODE_CORE in $node: expected $NODE_CORE_SHA256"; exit 1
  fi
  cp "$tmp/$NODE_CORE" "$stage/lib/$core_file"
}
if [ "$ort_version" != 1.29.0 ]; then
  node_core
  core_from="$NODE_PKG@$NODE_VERSION, CUDA-enabled, run on the CPU; headers of 1.29.0"
elif [ "$want_gpu" = yes ]; then
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_shared.so" "$stage/lib/"
  gpu=$(fetch $GPU_PKG $GPU_SHA256)
  tar xzf "$gpu" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so" "$stage/lib/"
  node_core
  core_from="$NODE_PKG@$NODE_VERSION, CUDA-enabled"
else
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime_providers_shared.so" "$stage/lib/"
  cp "$tmp/package/Plugins/Linux/x64/libonnxruntime.so" "$stage/lib/$core_file"
  core_from="$CORE_PKG@$VERSION, CPU-only"
fi
ln -s "$core_file" "$stage/lib/libonnxruntime.so.1"
ln -s libonnxruntime.so.1 "$stage/lib/libonnxruntime.so"
touch "$stage/$stamp"
rm -rf "$dest" && mv "$stage" "$dest"
say "ONNX Runtime $ort_version ready in $dest (core: $core_from; CUDA provider: $want_gpu)"
