#!/usr/bin/env bash
# Runs the tests that load ONNX Runtime against another core than the set-up's (CI: the newest
# published, while scripts/test.sh runs every test on the oldest supported, 1.29.0). One build serves
# every ONNX Runtime >= 1.29 (the library is loaded at run time), so nothing is rebuilt: the core is
# fetched into .deps/onnxruntime-VERSION and named through ORTFLEET_ORT_LIB, which the C++, command-line,
# corpus and Python tests all follow. On the CPU: no CUDA provider of a newer core is on npm.
# Usage: scripts/test-ort-version.sh VERSION    (after scripts/test.sh, which builds the tests and
#        fetches the real-model corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
[ $# -eq 1 ] || { echo "usage: $0 VERSION (e.g. 1.30.0)" >&2; exit 2; }
version=$1 dest=$PWD/.deps/onnxruntime-$1
say() { echo "test-ort-version: $*" >&2; }
scripts/fetch-onnxruntime.sh --no-gpu --version "$version" --dest "$dest"
export ORTFLEET_ORT_LIB=$dest/lib
# A test run against the set-up's core instead would pass and prove nothing: check what loads first.
loaded=$(build/release/bin/ortfleet doctor --no-register --json |
         "$PYTHON" -c 'import json, sys; r = json.load(sys.stdin)["runtime"]; print(r.get("version", "none"))')
if [ "$loaded" != "$version" ]; then say "ortfleet loaded ONNX Runtime $loaded, not $version from $ORTFLEET_ORT_LIB"; exit 1; fi
say "the tests that load ONNX Runtime, on $version ($ORTFLEET_ORT_LIB)"
ctest --preset release -j "$(nproc)" -L 'unit|cli|corpus' -LE gpu
PYTHONPATH="$PWD/build/release/python" ORTFLEET_BUILD_DIR="$PWD/build/release" "$PYTHON" -m pytest -q tests/python \
  --deselect tests/python/test_install.py
