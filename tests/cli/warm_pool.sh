#!/usr/bin/env bash
# warm_pool.sh ORTFLEET MODEL: the warm pool a first start leaves behind, as a user meets it, on a node
# with no `ortfleet serve`: the first `ortfleet start` is cold and says it left a pool, even with -q; `pool status`
# shows it, with its idle time; the next start finds the model resident on it; `--warm-pool-idle 0`
# leaves none; a pool left with a short idle time exits by itself; `pool stop` stops one. Each pool
# lives in this test's own runtime folder, and none is left running when the test ends.
set -uo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
export XDG_RUNTIME_DIR=$dir/run ORTFLEET_CACHE=$dir/cache
unset ORTFLEET_AUTO_POOL ORTFLEET_WARM_POOL_IDLE
mkdir -m 700 "$XDG_RUNTIME_DIR"
socket=$XDG_RUNTIME_DIR/ortfleet/pool.sock
cleanup() { "$cli" -q pool stop >/dev/null 2>&1; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAILED: $*"; [ -f "$socket.log" ] && { echo "--- pool log:"; cat "$socket.log"; }; exit 1; }
# Waits up to $2 tenths of a second for the condition $1 (a shell command).
await() { for _ in $(seq 1 "$2"); do eval "$1" && return 0; sleep 0.1; done; return 1; }

"$cli" -q start "$model" --devices cpu --json >"$dir/first.json" 2>"$dir/first.err" || fail "the first start failed: $(cat "$dir/first.err")"
grep -q "left a warm pool for the next job" "$dir/first.err" || fail "the first start (-q) did not say it left a pool: $(cat "$dir/first.err")"
grep -q '"resident": false' "$dir/first.json" || fail "the first start was not a cold one"
await '[ -S "$socket" ]' 300 || fail "no pool socket at $socket"
# The pool makes the model's cache entry and keeps the model loaded: wait until it holds the session.
await '"$cli" -q pool status --json 2>/dev/null | grep -q "\"model\": \".*$(basename "$model")\""' 600 ||
  fail "the pool never held the model: $("$cli" pool status 2>&1)"
"$cli" pool status >"$dir/status.txt" || fail "pool status failed"
grep -q "exits after 300 s idle" "$dir/status.txt" || fail "pool status does not say when the pool exits: $(cat "$dir/status.txt")"
"$cli" start "$model" --devices cpu --json >"$dir/second.json" 2>"$dir/second.err" || fail "the second start failed"
grep -q '"resident": true' "$dir/second.json" || fail "the second start was not resident: $(cat "$dir/second.json")"
grep -q "warm worker pool" "$dir/second.json" || fail "the second start does not say it used the pool"
"$cli" pool stop >/dev/null || fail "pool stop failed"
[ ! -e "$socket" ] || fail "the socket is still there after pool stop"

# --warm-pool-idle 0 leaves nothing behind.
"$cli" start "$model" --devices cpu --warm-pool-idle 0 >/dev/null 2>"$dir/none.err" || fail "the start with --warm-pool-idle 0 failed"
sleep 0.5
[ ! -e "$socket" ] || fail "--warm-pool-idle 0 left a pool"
grep -q "left a warm pool" "$dir/none.err" && fail "--warm-pool-idle 0 says it left a pool"

# A pool with a short idle time exits by itself, socket and workers with it.
ORTFLEET_WARM_POOL_IDLE=2 "$cli" start "$model" --devices cpu >/dev/null 2>&1 || fail "the start with ORTFLEET_WARM_POOL_IDLE=2 failed"
await '[ -S "$socket" ]' 300 || fail "no pool left with ORTFLEET_WARM_POOL_IDLE=2"
pid=$("$cli" -q pool status --json | sed -n 's/.*"pid": \([0-9]*\).*/\1/p' | tail -1)
await '[ ! -e "$socket" ]' 600 || fail "the pool did not exit after 2 s idle"
await '! kill -0 "$pid" 2>/dev/null' 100 || fail "the pool's process $pid is still running after its socket went"
grep -q "nobody used this pool for 2 s: exiting" "$socket.log" || fail "the pool's log does not say why it exited"

# No pool left: status says so and exits 4, stop has nothing to do and exits 0.
"$cli" pool status >"$dir/none.out" 2>"$dir/none.err"; code=$?
[ "$code" -eq 4 ] || fail "pool status with no pool exited $code, not 4"
grep -q "^ortfleet: no pool server on $socket: nothing of ortfleet's runs there" "$dir/none.err" || fail "pool status with no pool said: $(cat "$dir/none.err")"
"$cli" pool stop >/dev/null 2>&1 || fail "pool stop with no pool failed"
echo "ok: a first start leaves a warm pool (said even with -q), the next start is resident on it, idle exit, --warm-pool-idle 0, pool stop, no pool"
