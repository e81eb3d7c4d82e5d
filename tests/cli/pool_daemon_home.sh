#!/usr/bin/env bash
# pool_daemon_home.sh ORTFLEET MODEL: where a pool daemon lives and how it ends (issues 58, 59), on the CPU:
#   - the pool a job leaves works in "/" (it never keeps the job's folder busy) and `pool status` names
#     the job's model by its absolute path, though the job named it relative to its folder;
#   - `serve --detach` where that pool still runs takes it over (exit 0, it says so), never failing;
#   - SIGHUP ends a detached daemon as SIGTERM does: its socket goes, and so does it; and so for `serve`.
set -uo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
export XDG_RUNTIME_DIR=$dir/run ORTFLEET_CACHE=$dir/cache
unset ORTFLEET_AUTO_POOL ORTFLEET_WARM_POOL_IDLE
mkdir -m 700 "$XDG_RUNTIME_DIR" "$dir/work"
socket=$XDG_RUNTIME_DIR/ortfleet/pool.sock
serving=''
cleanup() { "$cli" -q pool stop >/dev/null 2>&1; [ -n "$serving" ] && kill -9 "$serving" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAILED: $*"; [ -f "$socket.log" ] && { echo "--- pool log:"; tail -20 "$socket.log"; }; exit 1; }
await() { for _ in $(seq 1 "$2"); do eval "$1" && return 0; sleep 0.1; done; return 1; }
pool_pid() { "$cli" -q pool status --json 2>/dev/null | sed -n 's/^  "pid": \([0-9]*\),*$/\1/p' | head -1; }

# 1. A job in its own folder names its model relative to it, and leaves a pool.
cp "$model" "$dir/work/m.onnx"
(cd "$dir/work" && "$cli" -q start m.onnx --devices cpu >"$dir/job.out" 2>"$dir/job.err") || fail "the job failed: $(cat "$dir/job.err")"
await '[ -S "$socket" ]' 300 || fail "the job left no pool"
await '"$cli" -q pool status --json 2>/dev/null | grep -q "\"model\": \"$dir/work/m.onnx\""' 600 ||
  fail "pool status does not name the job's model by its absolute path: $("$cli" -q pool status --json 2>&1 | grep '"model"')"
"$cli" -q pool status --json | grep -q '"model": "m.onnx"' && fail "pool status names the model as the job did, relative to a folder it is not in"
left=$(pool_pid)
[ -n "$left" ] || fail "no pid in pool status"
[ "$(readlink "/proc/$left/cwd")" = / ] || fail "the pool a job left works in $(readlink "/proc/$left/cwd"), not /"

# 2. A node daemon started meanwhile takes that pool over.
"$cli" serve --detach --devices cpu >"$dir/detach.out" 2>"$dir/detach.err" || fail "serve --detach failed where a job's pool ran: $(cat "$dir/detach.err")"
grep -q "took over the pool a job left on $socket (pid $left)" "$dir/detach.out" || fail "serve --detach did not say it took over: $(cat "$dir/detach.out")"
await '! kill -0 "$left" 2>/dev/null' 100 || fail "the pool a job left still runs"
daemon=$(pool_pid)
[ -n "$daemon" ] && [ "$daemon" != "$left" ] || fail "no new daemon on the socket"
[ "$(readlink "/proc/$daemon/cwd")" = / ] || fail "serve --detach works in $(readlink "/proc/$daemon/cwd"), not /"

# 3. SIGHUP ends the detached daemon: socket removed, process gone.
kill -HUP "$daemon"
await '! kill -0 "$daemon" 2>/dev/null' 150 || fail "the detached daemon still runs 15 s after SIGHUP"
[ ! -e "$socket" ] || fail "SIGHUP left the detached daemon's socket"

# 4. And `ortfleet serve` in the foreground, the same.
"$cli" serve --devices cpu --socket "$dir/fg.sock" 2>"$dir/fg.err" &
serving=$!
await '[ -S "$dir/fg.sock" ]' 300 || fail "ortfleet serve did not listen: $(cat "$dir/fg.err")"
kill -HUP "$serving"
await '! kill -0 "$serving" 2>/dev/null' 150 || fail "ortfleet serve still runs 15 s after SIGHUP"
wait "$serving" || fail "ortfleet serve exited with $? after SIGHUP: $(tail -3 "$dir/fg.err")"
serving=''
[ ! -e "$dir/fg.sock" ] || fail "SIGHUP left ortfleet serve's socket"
echo "ok: the pool a job left works in / and names its model absolutely; serve --detach took it over; SIGHUP ended both daemons, sockets removed"
