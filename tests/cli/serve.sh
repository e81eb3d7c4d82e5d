#!/usr/bin/env bash
# serve.sh ORTFLEET MODEL: `ortfleet serve` as an operator runs it. The socket appears with mode 0600,
# a client's first start makes the session and its second finds it resident, `pool status --json`
# lists it, and SIGTERM stops the server and removes the socket.
set -euo pipefail
cli=$1 model=$2
dir=$(mktemp -d); trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
socket=$dir/pool.sock
"$cli" serve --devices cpu*2 --socket "$socket" 2>"$dir/serve.log" &
server=$!
for _ in $(seq 1 300); do
  if [ -S "$socket" ] && "$cli" -q pool status --socket "$socket" --json >"$dir/status.json" 2>/dev/null &&
     ! grep -q '"state": "starting"' "$dir/status.json"; then break; fi
  sleep 0.1
done
[ -S "$socket" ] || { echo "FAILED: no socket"; cat "$dir/serve.log"; exit 1; }
[ "$(stat -c %a "$socket")" = 600 ] || { echo "FAILED: socket mode $(stat -c %a "$socket")"; exit 1; }
"$cli" start "$model" --devices cpu*2 --pool "$socket" --json >"$dir/first.json"
"$cli" start "$model" --devices cpu*2 --pool "$socket" --json >"$dir/second.json"
grep -q '"resident": false' "$dir/first.json" || { echo "FAILED: the first start was not new"; cat "$dir/first.json"; exit 1; }
if grep -q '"resident": false' "$dir/second.json"; then echo "FAILED: the second start was not resident"; cat "$dir/second.json"; exit 1; fi
"$cli" pool status --socket "$socket" --json >"$dir/status.json"
# Another user is refused, with one line that says why (where this runs as root and can become nobody).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  if setpriv --reuid=65534 --regid=65534 --clear-groups "$cli" pool status --socket "$socket" 2>"$dir/foreign.err"; then
    echo "FAILED: another user could use the pool"; exit 1
  fi
  grep -q "^ortfleet: error: permission denied on the pool socket .*another user" "$dir/foreign.err" ||
    { echo "FAILED: the foreign user's error:"; cat "$dir/foreign.err"; exit 1; }
fi
grep -q '"model": ".*mlp.onnx"' "$dir/status.json" || { echo "FAILED: status lists no session"; cat "$dir/status.json"; exit 1; }
kill -TERM $server
wait $server || { echo "FAILED: serve exited with $?"; cat "$dir/serve.log"; exit 1; }
[ ! -e "$socket" ] || { echo "FAILED: the socket is still there after SIGTERM"; exit 1; }
echo "ok: serve, start --pool twice (new, then resident), pool status, SIGTERM"
