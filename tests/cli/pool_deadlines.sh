#!/usr/bin/env bash
# pool_deadlines.sh ORTFLEET MODEL: a pool never waits on a busy worker (issue 50: a worker busy past its
# deadline was left running, the next start hung, `pool stop` failed after 60 s and SIGTERM did not end
# the pool or `ortfleet serve` within 30 s). Its workers here are busy in every start (the test hook
# ORTFLEET_TEST_WORKER_START_DELAY holds each start for 600 s):
#   - a client whose start misses its deadline finds the worker ended within 5 s of the deadline;
#   - `pool stop` ends the pool within 5 s while a client's start is busy, and leaves no worker;
#   - SIGTERM ends `ortfleet serve` within 10 s while a client's start is busy, and leaves no worker.
set -euo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
server='' client=''
trap 'kill -9 $server $client 2>/dev/null || true; rm -rf "$dir"' EXIT
socket=$dir/pool.sock
fail() { echo "FAILED: $*"; cat "$dir/serve.log" 2>/dev/null | tail -20; exit 1; }
now() { date +%s.%N; }
within() { awk -v a="$1" -v b="$2" -v limit="$3" 'BEGIN { exit !(b - a <= limit) }'; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

serve() {
  ORTFLEET_TEST_WORKER_START_DELAY=cpu=600 "$cli" serve --devices cpu --no-prime --no-isolation --socket "$socket" 2>>"$dir/serve.log" &
  server=$!
  for _ in $(seq 1 600); do
    if "$cli" -q pool status --socket "$socket" --json >"$dir/status.json" 2>/dev/null && grep -q '"state": "ready"' "$dir/status.json"; then
      return 0
    fi
    sleep 0.1
  done
  fail "the pool did not become ready"
}
worker_pid() { "$cli" -q pool status --socket "$socket" --json | grep -o '"pid": [0-9]*' | head -1 | grep -o '[0-9]*$'; }
busy_client() {
  "$cli" -q start "$model" --devices cpu --pool "$socket" --timeout 600 >/dev/null 2>&1 &
  client=$!
  sleep 1  # its start is in the worker now, and will be for 600 s
}

# 1. A start past its deadline: the worker is ended within 5 s of it.
serve
busy=$(worker_pid)
if "$cli" start "$model" --devices cpu --pool "$socket" --timeout 3 >"$dir/late.out" 2>"$dir/late.err"; then fail "a start held for 600 s was ready in 3 s"; fi
missed=$(now)
cat "$dir/late.out" "$dir/late.err" | grep -q "did not become ready within 3 s" || { cat "$dir/late.out" "$dir/late.err"; fail "the late start's error"; }
while kill -0 "$busy" 2>/dev/null && within "$missed" "$(now)" 5; do sleep 0.05; done
if kill -0 "$busy" 2>/dev/null; then fail "the worker $busy busy past the deadline still runs 5 s after it"; fi
ended=$(since "$missed")

# 2. pool stop while a client's start is busy: within 5 s, no worker left.
busy_client
workers=$(pgrep -P "$server" || true)
[ -n "$workers" ] || fail "the pool has no worker"
asked=$(now)
timeout 30 "$cli" pool stop --socket "$socket" || fail "pool stop failed"
stopped=$(since "$asked")
within "$asked" "$(now)" 5 || fail "pool stop took $stopped s"
wait "$server" || true
for w in $workers; do if kill -0 "$w" 2>/dev/null; then fail "worker $w outlived pool stop"; fi; done
[ ! -e "$socket" ] || fail "the socket is still there after pool stop"
wait "$client" || true

# 3. SIGTERM to `ortfleet serve` while a client's start is busy: within 10 s, no worker left.
serve
busy_client
workers=$(pgrep -P "$server" || true)
sent=$(now)
kill -TERM "$server"
while kill -0 "$server" 2>/dev/null && within "$sent" "$(now)" 10; do sleep 0.05; done
if kill -0 "$server" 2>/dev/null; then fail "ortfleet serve still runs 10 s after SIGTERM"; fi
terminated=$(since "$sent")
wait "$server" || fail "serve exited with $? after SIGTERM"
for w in $workers; do if kill -0 "$w" 2>/dev/null; then fail "worker $w outlived SIGTERM"; fi; done
[ ! -e "$socket" ] || fail "the socket is still there after SIGTERM"
wait "$client" || true
echo "ok: with a worker busy in a start, the worker past its deadline was gone ${ended} s after it (at most 5), pool stop took ${stopped} s (at most 5), serve ended ${terminated} s after SIGTERM (at most 10); no worker left"
