#!/usr/bin/env bash
# The C++ quick-start as a user takes it (docs/getting-started.md#c): `cmake --install BUILD --prefix P`,
# the program and its CMakeLists.txt exactly as the page gives them (read from the page, not copied
# here), configured with find_package(ortfleet) against P, built, and run on MODEL on the CPU with
# nothing of the build tree to fall back on (no ORTFLEET_WORKER, no ORTFLEET_ORT_*; where a private
# mount namespace is allowed, the checkout's .deps/ and the build tree's bin/ and lib/ hidden):
#   - it is ready, prints its outputs and exits 0, with the worker and ONNX Runtime of P;
#   - with ORTFLEET_WARM_POOL_IDLE=0 nothing of it runs once it has ended;
#   - by default it leaves the warm pool it says it leaves on stderr, in `/` (no folder of the user's
#     held), and nothing else; `ortfleet pool stop` ends it.
# Usage: cpp_example.sh BUILD_DIR SOURCE_DIR MODEL
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd) model=$3
fail() { echo "cpp_example.sh: FAILED: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ortfleet-cpp-example.XXXXXX")
mark=ORTFLEET_CPP_EXAMPLE_$$_$RANDOM  # in the environment of everything the program starts
# Processes started by the program that still run: found by the mark in their environment.
marked() {
  local pids=() p
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "CPP_EXAMPLE_MARK=$mark"; then pids+=("${p#/proc/}"); fi
  done
  echo "${pids[@]:-}"
}
cleanup() {
  local p
  for p in $(marked); do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# Waits up to 30 s for the marked processes to be gone (a fleet stops its workers as it ends; a
# pool stop returns once the socket is gone, its workers a moment later).
none_left() {
  for _ in $(seq 1 300); do [ -z "$(marked)" ] && return 0; sleep 0.1; done
  return 1
}

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# The page's C++ section: its first ```cpp block is app.cpp, its first ```cmake block CMakeLists.txt.
mkdir -p "$tmp/app" "$tmp/work" "$tmp/run"
chmod 700 "$tmp/run"
block() {
  awk -v lang="$1" '/^## /{in_section = ($0 == "## C++")} in_section && !done && $0 == "```" lang {inside = 1; next}
                    inside && $0 == "```" {inside = 0; done = 1} inside' "$source/docs/getting-started.md"
}
block cpp >"$tmp/app/app.cpp"
block cmake >"$tmp/app/CMakeLists.txt"
grep -q 'int main' "$tmp/app/app.cpp" || fail "docs/getting-started.md's C++ section has no program: $(head -3 "$tmp/app/app.cpp")"
grep -q 'find_package(ortfleet' "$tmp/app/CMakeLists.txt" || fail "docs/getting-started.md's C++ section has no CMakeLists.txt with find_package"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$tmp/app" -B "$tmp/app/b" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 ||
  fail "configuring the example against the install failed: $(tail -20 "$tmp/configure.log")"
cmake --build "$tmp/app/b" >"$tmp/build.log" 2>&1 || fail "building the example failed: $(tail -30 "$tmp/build.log")"
app=$tmp/app/b/app
cp "$model" "$tmp/work/model.onnx"

# The checkout's set-up and the build tree's binaries hidden, where a private mount namespace is allowed.
hidden=()
if command -v unshare >/dev/null && unshare -rm true 2>/dev/null; then
  for d in "$source/.deps" "$build/bin" "$build/lib"; do [ -d "$d" ] && hidden+=("$d"); done
  mkdir -p "$tmp/empty"
else
  echo "cpp_example.sh: the build tree stays visible (no private mount namespace here)" >&2
fi
run() {  # run ENV... -- COMMAND...: in the work folder, with this test's environment and nothing of the build's
  local envs=() mounts=""
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  for d in "${hidden[@]}"; do mounts+="mount --bind '$tmp/empty' '$d' && "; done
  local cmd=(env -u ORTFLEET_WORKER -u ORTFLEET_ORT_LIB -u ORTFLEET_ORT_ROOT -u ORTFLEET_AUTO_POOL -u ORTFLEET_WARM_POOL_IDLE
             -u ORTFLEET_BUILD_DIR ORTFLEET_CACHE="$tmp/cache" XDG_RUNTIME_DIR="$tmp/run" CPP_EXAMPLE_MARK="$mark" "${envs[@]}")
  if [ ${#hidden[@]} -gt 0 ]; then
    (cd "$tmp/work" && "${cmd[@]}" unshare -rm sh -c "$mounts exec \"\$@\"" sh "$@")
  else
    (cd "$tmp/work" && "${cmd[@]}" "$@")
  fi
}

# 1. Nothing left: ready, its outputs, and no process of it once it has ended.
run ORTFLEET_WARM_POOL_IDLE=0 -- "$app" model.onnx >"$tmp/out1" 2>"$tmp/err1" ||
  fail "the example failed (exit $?): $(cat "$tmp/out1" "$tmp/err1")"
grep -q '^ready on cpu' "$tmp/out1" || fail "the example did not say it was ready on the CPU: $(cat "$tmp/out1")"
grep -q '^output .*: [0-9]* values' "$tmp/out1" || fail "the example printed no output: $(cat "$tmp/out1")"
grep -q 'left a warm pool' "$tmp/err1" && fail "a warm pool was left with ORTFLEET_WARM_POOL_IDLE=0: $(cat "$tmp/err1")"
none_left || fail "processes of the example still run after it ended: $(for p in $(marked); do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"
echo "cpp_example.sh: built from the page against $tmp/prefix; ready, outputs, nothing left running"

# 2. By default: the warm pool it says it leaves, and nothing else; in /, holding no folder of the user's.
run -- "$app" model.onnx >"$tmp/out2" 2>"$tmp/err2" || fail "the example failed (exit $?): $(cat "$tmp/out2" "$tmp/err2")"
grep -q 'left a warm pool for .* it exits after 300 s unused' "$tmp/err2" ||
  fail "the example did not say what it left running: $(cat "$tmp/err2")"
left=$(marked)
[ -n "$left" ] || fail "the example said it left a warm pool, but nothing of it runs"
for p in $left; do
  exe=$(readlink "/proc/$p/exe" 2>/dev/null || true)
  case "$exe" in
    "$tmp/prefix/bin/"*) ;;
    *) fail "a process left by the example is not the install's ($exe): $(tr '\0' ' ' <"/proc/$p/cmdline")" ;;
  esac
  cwd=$(readlink "/proc/$p/cwd" 2>/dev/null || true)
  [ "$cwd" != "$tmp/work" ] || fail "the warm pool left by the example holds the program's folder as its working directory"
done
run -- "$tmp/prefix/bin/ortfleet" -q pool stop >/dev/null 2>"$tmp/stop.err" || fail "ortfleet pool stop failed: $(cat "$tmp/stop.err")"
none_left || fail "the warm pool's processes still run after ortfleet pool stop"
echo "cpp_example.sh: ok (by default it leaves a warm pool, says so on stderr, and pool stop ends it)"
