#!/usr/bin/env bash
# unpack.sh: on the GPU machine, after env.sh (which brings zstd): lays pack.sh's payload out under
# /tmp/ortfleet-build/{bin,prefix,models}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=/tmp/ortfleet-build
mkdir -p "$dest"
env LD_LIBRARY_PATH=/tmp/ortfleet-device/parts /tmp/ortfleet-device/parts/zstd -d -q -c "$here/ortfleet.tar.zst" | tar xf - -C "$dest"
ls "$dest/bin" "$dest/models"
