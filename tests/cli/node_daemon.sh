#!/usr/bin/env bash
# node_daemon.sh UNIT MODEL CRASH_OPS CRASH_MODEL_WRITER: the systemd user unit's daemon as systemd
# runs it (its ExecStart line, Type=simple, in a user session's XDG_RUNTIME_DIR), on the CPU:
#   - the unit names this build's ortfleet, which exists;
#   - a job finds the daemon on the default socket by itself ("auto chose the warm worker pool");
#   - a job whose model crashes ONNX Runtime fails alone: the daemon lives, and the first job's model
#     is still resident in it; a job killed mid-start takes nothing down either;
#   - another user is refused (where this runs as root and can become nobody);
#   - SIGTERM ends it within 10 s and removes its socket;
#   - started again, the model it served is resident before any job asks, and the next job finds it.
set -euo pipefail
unit=$1 model=$2 crash_ops=$3 crash_writer=$4
dir=$(mktemp -d); trap 'kill -9 $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; [ -f "$dir/daemon.log" ] && tail -20 "$dir/daemon.log"; exit 1; }
[ -f "$unit" ] || fail "no unit at $unit"
grep -q '^WantedBy=default.target' "$unit" || fail "the unit is not wanted by the user's default target"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
read -r -a argv <<<"$exec_start"
cli=${argv[0]}
[ -x "$cli" ] || fail "the unit's ExecStart names $cli, which is not an executable"
[ "${argv[1]}" = serve ] || fail "the unit does not run ortfleet serve: $exec_start"
# The user manager's environment: a private runtime folder, nothing of the test's ORTFLEET_* settings.
export XDG_RUNTIME_DIR=$dir/run ORTFLEET_CACHE=$dir/cache
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset ORTFLEET_AUTO_POOL
socket=$XDG_RUNTIME_DIR/ortfleet/pool.sock
"${argv[@]}" >"$dir/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 1 300); do
  "$cli" -q pool status --json >"$dir/status.json" 2>/dev/null && ! grep -q '"state": "starting"' "$dir/status.json" && break
  sleep 0.1
done
[ -S "$socket" ] || fail "the daemon did not listen on $socket"
# A job finds it by itself, and its model stays resident.
"$cli" start "$model" >"$dir/job1.txt" 2>&1 || fail "the first job failed: $(cat "$dir/job1.txt")"
grep -q "auto chose the warm worker pool on $socket" "$dir/job1.txt" || fail "the job did not use the daemon: $(head -3 "$dir/job1.txt")"
# A crashing model ends its job alone.
"$crash_writer" "$dir/crash.onnx" 4 2 >/dev/null
if "$cli" start "$dir/crash.onnx" --custom-ops "$crash_ops" >"$dir/crash.txt" 2>&1; then fail "the crashing job succeeded"; fi
grep -q "SIGSEGV" "$dir/crash.txt" || fail "the crashing job's error does not say so: $(tail -3 "$dir/crash.txt")"
kill -0 $daemon 2>/dev/null || fail "the daemon died with the crashing job"
# A job killed mid-start takes nothing down.
"$cli" start "$model" --json >/dev/null 2>&1 & job=$!
sleep 0.05; kill -9 $job 2>/dev/null || true; wait $job 2>/dev/null || true
"$cli" start "$model" --json >"$dir/job2.json" 2>"$dir/job2.err" || fail "the job after the crash failed: $(cat "$dir/job2.err")"
grep -q '"resident": true' "$dir/job2.json" || fail "the first job's model is no longer resident after the crash"
kill -0 $daemon 2>/dev/null || fail "the daemon died"
# Another user is refused, with one line saying why.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  if setpriv --reuid=65534 --regid=65534 --clear-groups "$cli" pool status --socket "$socket" 2>"$dir/foreign.err"; then
    fail "another user could use the daemon"
  fi
  grep -q "^ortfleet: error: permission denied on the pool socket .*another user" "$dir/foreign.err" || fail "the other user's error: $(cat "$dir/foreign.err")"
fi
# systemd stops it with SIGTERM.
kill -TERM $daemon
for _ in $(seq 1 100); do kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
kill -0 $daemon 2>/dev/null && fail "the daemon still runs 10 s after SIGTERM"
wait $daemon || fail "the daemon exited with $? after SIGTERM"
[ ! -e "$socket" ] || fail "the socket is still there after SIGTERM"
# Started again (a reboot, the unit's restart): what it served is resident before any job asks (issue 60).
"${argv[@]}" >"$dir/daemon2.log" 2>&1 &
daemon=$!
for _ in $(seq 1 300); do
  "$cli" -q pool status --json >"$dir/status2.json" 2>/dev/null && grep -q '"preloaded": true' "$dir/status2.json" && break
  sleep 0.1
done
grep -q '"preloaded": true' "$dir/status2.json" || fail "the restarted daemon did not make what it served resident: $(cat "$dir/status2.json")"
"$cli" start "$model" --json >"$dir/job3.json" 2>"$dir/job3.err" || fail "the first job after the restart failed: $(cat "$dir/job3.err")"
grep -q '"resident": true' "$dir/job3.json" || fail "the first job after the restart made its session anew"
kill -TERM $daemon
wait $daemon || fail "the restarted daemon exited with $? after SIGTERM"
echo "ok: the unit's daemon served jobs found by default, outlived a crashing and a killed job, refused another user, stopped on SIGTERM, and started again with what it served resident"
