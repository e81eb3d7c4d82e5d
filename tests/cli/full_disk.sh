#!/usr/bin/env bash
# full_disk.sh ORTFLEET: a full disk is said as such, in one short line, where ortfleet writes (issue 58's
# re-audit, U2 and U3): the model cache's folder on a full disk named with what ONNX Runtime's failed write
# said, shortened (it followed with a C++ signature and its status prefix); `tune` and `profile` with a
# full $TMPDIR say the disk is full, where, and what to do (they blamed ONNX Runtime's log or profile:
# "cannot read ONNX Runtime's log", "malformed ONNX Runtime profile ...: not JSON").
# The disk is a 600 kB tmpfs in a private mount namespace; exits 77 (skipped) where the machine refuses one.
set -uo pipefail
cli=$1
if [ -z "${FULL_DISK_INSIDE:-}" ]; then
  if ! command -v unshare >/dev/null || ! unshare -rm true 2>/dev/null; then
    echo "full_disk.sh: skipped: a small disk needs a private mount namespace (unshare -rm), which this machine refuses" >&2
    exit 77
  fi
  exec unshare -rm env FULL_DISK_INSIDE=1 "$0" "$@"
fi
dir=$(mktemp -d)
trap 'umount "$dir/disk" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=$dir/cache
mkdir "$dir/disk"
mount -t tmpfs -o size=600k tmpfs "$dir/disk" || { echo "full_disk.sh: skipped: cannot mount a tmpfs here" >&2; exit 77; }
# A model whose cache entry (3 MB of weights) cannot fit the disk.
"$cli" -q synth resnet --depth 18 --width 0.25 "$dir/model.onnx" >/dev/null || fail "synth resnet failed"
# ONNX Runtime's own words, which no line may carry.
noise='onnxruntime::|\[ONNXRuntimeError\]|\.cc:[0-9]|\\n'

ORTFLEET_CACHE=$dir/disk/cache "$cli" start "$dir/model.onnx" --devices cpu >"$dir/start.out" 2>"$dir/start.err" || fail "start failed: $(cat "$dir/start.err")"
said=$(grep "was not made" "$dir/start.err")
echo "$said" | grep -q "the disk holding $dir/disk/cache/models is full" || fail "start did not say the disk is full: $(cat "$dir/start.err")"
! grep -Eq "$noise" "$dir/start.err" || fail "start said ONNX Runtime's raw text: $(grep -E "$noise" "$dir/start.err")"

rm -rf "$dir/disk/cache"
head -c 560000 /dev/zero >"$dir/disk/filler" 2>/dev/null  # what is left: a few kB
for command in "tune --device cpu --quick --repeat 1" "profile --device cpu --runs 3"; do
  name=${command%% *}
  TMPDIR=$dir/disk "$cli" $command "$dir/model.onnx" >"$dir/$name.out" 2>"$dir/$name.err"
  rc=$?
  [ "$rc" -ne 0 ] || fail "$name succeeded on a full disk"
  [ "$(wc -l <"$dir/$name.err")" -eq 1 ] || fail "$name said more than one line: $(cat "$dir/$name.err")"
  grep -q "the disk holding $dir/disk/ortfleet-$name-[^ ]* is full" "$dir/$name.err" || fail "$name did not say the disk is full: $(cat "$dir/$name.err")"
  grep -q "set TMPDIR to a folder on a disk with room" "$dir/$name.err" || fail "$name did not say what to do: $(cat "$dir/$name.err")"
  ! grep -Eq "malformed|cannot read|json.exception" "$dir/$name.err" || fail "$name blamed ONNX Runtime's file: $(cat "$dir/$name.err")"
  [ -z "$(ls -A "$dir/disk" | grep -v '^filler$')" ] || fail "$name left in TMPDIR: $(ls -A "$dir/disk")"
done
echo "ok: a full disk is said as such by start's cache, tune and profile, in one line without ONNX Runtime's raw text"
