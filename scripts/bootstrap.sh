#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (or updates a checkout) and builds ortfleet:
#   1. the Debian packages ortfleet builds with (only the missing ones are installed),
#   2. ONNX Runtime 1.29.0 from the npm registry (scripts/fetch-onnxruntime.sh; its CUDA provider too
#      where a GPU is present, or with ORTFLEET_GPU=1; another version with ORTFLEET_ORT_VERSION), and
#      Apache ECharts, which `ortfleet report` inlines into its pages (scripts/fetch-web-assets.sh),
#   3. the CMake preset "release": library, command line, worker, the Python module and the man pages.
#      Not the tests: scripts/test.sh builds them (target ortfleet_all_tests) before it runs them.
# Chromium and Pillow are only for the test that opens a report in a headless browser; help2man makes
# the man pages (the build skips them without it).
# Safe to run again: each step is skipped when done. The build lands in build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}

# Tools count as present when their command is (npm may come from NodeSource or nvm rather than
# Debian, and Debian's npm would conflict with it); libraries when their Debian package is installed.
tools=(g++:build-essential cmake:cmake ninja:ninja-build npm:npm zstd:zstd)
packages=(ca-certificates libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libgtest-dev
          python3 python3-dev python3-pybind11 python3-numpy python3-pytest python3-pip python3-venv
          chromium python3-pil help2man)
missing=()
for t in "${tools[@]}"; do command -v "${t%%:*}" >/dev/null || missing+=("${t#*:}"); done
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "bootstrap: these Debian packages are missing and I cannot install them without root: ${missing[*]}" >&2; exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${ORTFLEET_GPU:-0}" = 1 ]; then scripts/fetch-onnxruntime.sh --gpu; else scripts/fetch-onnxruntime.sh; fi
scripts/fetch-web-assets.sh

cmake --preset release -DPython_EXECUTABLE="$PYTHON" >/dev/null
cmake --build --preset release
echo "bootstrap: built into build/release (ortfleet: build/release/bin/ortfleet)" >&2
