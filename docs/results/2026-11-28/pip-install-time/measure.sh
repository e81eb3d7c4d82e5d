#!/usr/bin/env bash
# Times `pip install .` from a clean clone, as issue 53 counts it: a fresh `git clone` of COMMIT (no build
# tree), a venv made with --system-site-packages (numpy from Debian's python3-numpy: nothing from PyPI),
# the Debian packages scripts/bootstrap.sh installs already installed, ccache off, npm's cache warm
# (~/.cache/ortfleet/npm; --empty-npm-cache: a new, empty one). pip runs as a user runs it (no -v),
# under `script`, a pseudo-terminal, so that what a person sees is recorded. Writes into OUT_DIR:
#   terminal.txt  what the terminal showed, with `time`'s real (wall) and user+sys (CPU) and the load before and after
#   ninja_log.txt the build's steps (.ninja_log), slowest.txt the 15 slowest
#   again.txt     a second `pip install .` in the same clone (it reuses the build)
#   command.txt   `.venv/bin/ortfleet --version`: the console script on the venv's PATH
# Usage: measure.sh SOURCE_REPO COMMIT OUT_DIR [--empty-npm-cache]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 SOURCE_REPO COMMIT OUT_DIR [--empty-npm-cache]" >&2; exit 2; }
src=$1 commit=$2 out=$(mkdir -p "$3" && cd "$3" && pwd); shift 3
for a in "$@"; do
  case "$a" in
    --empty-npm-cache) XDG_CACHE_HOME=$(mktemp -d /tmp/empty-cache-XXXXXX); export XDG_CACHE_HOME npm_config_cache=$XDG_CACHE_HOME/npm-cli ;;
    *) echo "unknown $a" >&2; exit 2 ;;
  esac
done
slowest=$(cd "$(dirname "$0")/../../2026-11-27/setup-time" && pwd)/slowest-steps.sh
clone=$(mktemp -d /tmp/pip-clone-XXXXXX)
git clone -q "$src" "$clone" && git -C "$clone" checkout -q "$commit"
unset CMAKE_CXX_COMPILER_LAUNCHER
export CCACHE_DISABLE=1
cd "$clone"
/usr/bin/python3 -m venv --system-site-packages .venv
timed_pip() {  # the pip command in a pseudo-terminal, under bash's `time`: real (wall), user and sys (CPU, children included)
  script -qec "bash -c 'time .venv/bin/pip install .'" /dev/null
}
{ echo "commit $(git rev-parse --short HEAD), $(nproc) cores, npm cache: ${XDG_CACHE_HOME:-warm}, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "\$ .venv/bin/pip install ."
  timed_pip
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$out/terminal.txt" 2>&1
cp build/release/.ninja_log "$out/ninja_log.txt"
"$slowest" build/release/.ninja_log 15 > "$out/slowest.txt"
{ echo "\$ .venv/bin/pip install .   (again, in the same clone)"; timed_pip; } > "$out/again.txt" 2>&1
{ echo "\$ PATH=\$PWD/.venv/bin:\$PATH; command -v ortfleet; ortfleet --version"
  PATH=$clone/.venv/bin:$PATH
  command -v ortfleet | sed "s|$clone|<clone>|"; ortfleet --version; } > "$out/command.txt" 2>&1
sed -i "s|$clone|<clone>|g" "$out/terminal.txt" "$out/again.txt"
rm -rf "$clone"
