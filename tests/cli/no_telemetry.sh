#!/usr/bin/env bash
# no_telemetry.sh ORTFLEET MODEL [PYTHONPATH]: no ortfleet process starts ONNX Runtime's telemetry
# uploader. Builds that carry it (the fetched 1.29 core) write /tmp/mat-debug-<pid>.log (it ignores
# TMPDIR) and /tmp/.ses, and keep a device id under ~/.cache/Microsoft/DeveloperTools/.onnxruntime, for
# every process that makes an environment. The CLI, its worker processes, the warm pool a start leaves
# and the Python module each run here with a home of their own; none may have made that folder, nor
# the log of its own pid. `doctor` says the telemetry is off.
set -uo pipefail
cli=$1 model=$2 pythonpath=${3:-}
dir=$(mktemp -d)
export HOME=$dir/home XDG_RUNTIME_DIR=$dir/run ORTFLEET_CACHE=$dir/cache ORTFLEET_AUTO_POOL=0
unset ORT_DISABLE_TELEMETRY XDG_CACHE_HOME
mkdir -p "$HOME" && mkdir -m 700 "$XDG_RUNTIME_DIR"
cleanup() { "$cli" -q pool stop >/dev/null 2>&1; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAILED: $*"; exit 1; }
# run NAME COMMAND...: runs it as a process whose pid is known (exec), and checks what it left.
run() {
  local name=$1; shift
  bash -c 'echo $$ > "$0"; exec "$@"' "$dir/$name.pid" "$@" >"$dir/$name.out" 2>&1 || fail "$name failed: $(cat "$dir/$name.out")"
  local pid; pid=$(cat "$dir/$name.pid")
  # Only a log made since it started: another process of that pid, long gone, may have left one.
  [ -z "$(find /tmp -maxdepth 1 -name "mat-debug-$pid.log" -newer "$dir/$name.pid" 2>/dev/null)" ] ||
    fail "$name (pid $pid) left /tmp/mat-debug-$pid.log"
}
run doctor "$cli" doctor
grep -q "ONNX Runtime's telemetry: .*\(keeps it off\|has no telemetry uploader\)" "$dir/doctor.out" || fail "doctor does not say the telemetry is off: $(grep -i telemetry "$dir/doctor.out")"
run workers "$cli" start "$model" --devices 'cpu*2' --strategy processes
# A start that leaves a warm pool: the daemon and its workers too.
run pool env ORTFLEET_AUTO_POOL=1 "$cli" start "$model" --devices cpu
for _ in $(seq 1 300); do [ -S "$XDG_RUNTIME_DIR/ortfleet/pool.sock" ] && break; sleep 0.1; done
"$cli" -q pool status >/dev/null 2>&1 || fail "no warm pool was left to check"
if [ -n "$pythonpath" ]; then
  run python env PYTHONPATH="$pythonpath" /usr/bin/python3 -c \
    "import ortfleet, sys; f = ortfleet.Fleet(sys.argv[1], devices='cpu*2', strategy='processes'); f.start(); f.wait(); f.shutdown()" "$model"
fi
"$cli" -q pool stop >/dev/null 2>&1
[ ! -e "$HOME/.cache/Microsoft" ] || fail "a process made $HOME/.cache/Microsoft: $(find "$HOME/.cache/Microsoft")"
echo "ok: no telemetry file from the CLI, its workers, the warm pool${pythonpath:+ or the Python module}; doctor says it is off"
