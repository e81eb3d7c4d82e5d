#!/usr/bin/env bash
# library_checks.sh ORTFLEET MODEL CRASH_ON_LOAD_LIBRARY PYTHONPATH: a library ortfleet loads into its
# process (the runtime, custom ops) never kills it unnamed, and no path a user names makes it wait
# (issue 58 items 3 and 4):
#   - libz's first 4 kB, padded to 1 GB or not, as the runtime (flag, environment, Python) or as custom
#     ops: one error line, before any load (no SIGBUS or SIGSEGV);
#   - a named pipe as the runtime (flag, environment, doctor, start, serve --detach, Python): an error
#     at once, never a wait;
#   - a whole library whose initialiser crashes: the process dies of it, and its line names the library
#     (never a model or its node);
#   - a runtime in a folder other users can write, or writable by them itself: refused.
set -uo pipefail
cli=$1 model=$2 crash_lib=$3 pythonpath=$4
PYTHON=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; echo "--- stdout:"; cat "$dir/out" 2>/dev/null; echo "--- stderr:"; cat "$dir/err" 2>/dev/null; exit 1; }
libz=$("$PYTHON" -c "import ctypes.util, os; print(os.path.realpath('/lib/x86_64-linux-gnu/' + ctypes.util.find_library('z')))" 2>/dev/null)
[ -f "$libz" ] || libz=$(ldconfig -p | awk '/libz.so.1 / { print $NF; exit }')
head -c 4096 "$libz" > "$dir/head.so"
cp "$dir/head.so" "$dir/padded.so" && truncate -s 1G "$dir/padded.so"
mkfifo "$dir/pipe.so"
runtime=$("$cli" doctor --json | "$PYTHON" -c "import json, sys; print(json.load(sys.stdin)['runtime']['path'])")

# expect CODE PATTERN COMMAND...: its exit code within 60 s (124: it waited), and PATTERN in its output.
expect() {
  local want=$1 pattern=$2; shift 2
  timeout 60 "$@" >"$dir/out" 2>"$dir/err"; local got=$?
  [ "$got" -eq "$want" ] || fail "exit $got, expected $want: $*"
  cat "$dir/out" "$dir/err" | grep -Eq -- "$pattern" || fail "the output does not match /$pattern/: $*"
  echo "ok: exit $got: $*"
}

for bad in head padded; do
  expect 1 "^ortfleet: error: the ONNX Runtime library .*$bad.so .from --ort-lib. (is cut short|is not a shared library this process can load)" \
    "$cli" --ort-lib "$dir/$bad.so" doctor
  # From the environment each device loads it: the start fails there (exit 3), in one line each.
  expect 3 "cpu: the ONNX Runtime library .*$bad.so .from ORTFLEET_ORT_LIB. (is cut short|is not a shared library this process can load)" \
    env ORTFLEET_ORT_LIB="$dir/$bad.so" "$cli" start "$model" --devices cpu --strategy threads
  expect 2 "^ortfleet: error: the custom-op library .*$bad.so (is cut short|is not a shared library this process can load)" \
    "$cli" start "$model" --devices cpu --custom-ops "$dir/$bad.so"
done
expect 1 "^ortfleet: error: the ONNX Runtime library .*pipe.so .from --ort-lib. is a named pipe, not a file" "$cli" --ort-lib "$dir/pipe.so" doctor
expect 1 "pipe.so .from ORTFLEET_ORT_LIB. is a named pipe, not a file" env ORTFLEET_ORT_LIB="$dir/pipe.so" "$cli" doctor
expect 3 "pipe.so .from ORTFLEET_ORT_LIB. is a named pipe, not a file" env ORTFLEET_ORT_LIB="$dir/pipe.so" "$cli" start "$model" --devices cpu
expect 1 "^ortfleet: error: .*pipe.so .from --ort-lib. is a named pipe" "$cli" --ort-lib "$dir/pipe.so" start "$model" --devices cpu
expect 1 "^ortfleet: error: .*pipe.so .from --ort-lib. is a named pipe" "$cli" --ort-lib "$dir/pipe.so" serve --detach --socket "$dir/s.sock" --devices cpu
expect 2 "^ortfleet: error: the custom-op library .*pipe.so is not a file .it is a named pipe." "$cli" start "$model" --devices cpu --custom-ops "$dir/pipe.so"
cat > "$dir/python_checks.py" <<'PY'
import sys, ortfleet
model, folder = sys.argv[1], sys.argv[2]
for library in ("pipe.so", "head.so", "padded.so"):
    try:
        with ortfleet.Fleet(model, devices="cpu", strategy="threads", ort_library=f"{folder}/{library}") as fleet:
            fleet.start()
            if fleet.wait():
                sys.exit(f"Fleet(ort_library={library}) started")
            print(f"refused {library}: {fleet.status()[0]['error']}", file=sys.stderr)
    except ortfleet.Error as e:
        print(f"refused {library}: {e}", file=sys.stderr)
PY
expect 0 "refused padded.so: the ONNX Runtime library .*padded.so" env PYTHONPATH="$pythonpath" "$PYTHON" "$dir/python_checks.py" "$model" "$dir"
grep -q "refused pipe.so: .*is a named pipe, not a file" "$dir/err" || fail "Python's Fleet did not refuse the pipe"

# A whole library that crashes as it is loaded: the line names it, nothing else.
for how in "--ort-lib $crash_lib doctor" "start $model --devices cpu --strategy threads --custom-ops $crash_lib"; do
  # shellcheck disable=SC2086  # the words are the command's arguments
  timeout 60 "$cli" $how >"$dir/out" 2>"$dir/err"; got=$?
  [ "$got" -eq 139 ] || fail "exit $got, expected death by SIGSEGV (139): $how"
  grep -Eq "^ortfleet: SIGSEGV .* while loading (ONNX Runtime|the custom-op library) .*libortfleet_test_crash_on_load.so" "$dir/err" || fail "the crash line does not name the library: $how"
  if grep -Eq "locate-crash|node|mlp.onnx" "$dir/err"; then fail "the crash line blames the model: $how"; fi
  echo "ok: exit 139, the library named: $how"
done

# Other users' writes: the library, or the folder it lies in.
mkdir -m 755 "$dir/open"
cp "$runtime" "$dir/open/libonnxruntime.so"
chmod 644 "$dir/open/libonnxruntime.so"
expect 0 "" "$cli" --ort-lib "$dir/open/libonnxruntime.so" doctor
chmod 777 "$dir/open"
expect 1 "^ortfleet: error: the folder .*open holding the ONNX Runtime library .*libonnxruntime.so .from --ort-lib. can be written by other users .mode 0777." \
  "$cli" --ort-lib "$dir/open/libonnxruntime.so" doctor
chmod 755 "$dir/open"; chmod 666 "$dir/open/libonnxruntime.so"
expect 3 "cpu: the ONNX Runtime library .*libonnxruntime.so .from ORTFLEET_ORT_LIB. can be written by other users .mode 0666." \
  env ORTFLEET_ORT_LIB="$dir/open/libonnxruntime.so" "$cli" start "$model" --devices cpu --strategy threads
echo "library checks: ok"
