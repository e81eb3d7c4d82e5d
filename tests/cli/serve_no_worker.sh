#!/usr/bin/env bash
# serve_no_worker.sh ORTFLEET: `ortfleet serve` whose workers cannot start fails, exit 1, with their reason
# in one line (the re-audit of issue 58, S4: `ORTFLEET_ORT_LIB=<a FIFO> serve --detach` said "a warm pool
# serves on ..." and exited 0 with every worker failed). The runtime is checked before anything, naming
# where it came from; a worker that fails otherwise (here an ORTFLEET_WORKER that exits at once) stops the
# pool once every device's worker has failed. The pool's log says settings as flags.
set -euo pipefail
cli=$1
worker=$(dirname "$cli")/ortfleet-worker
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; for f in "$dir"/*.err "$dir"/*.log; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
one_error_line() {  # FILE: exactly one line, the error
  [ "$(wc -l <"$1")" = 1 ] && grep -q "^ortfleet: error: " "$1"
}

# 1. The runtime a FIFO: refused at once, where it came from named, nothing left listening.
mkfifo "$dir/fifo"
rc=0; ORTFLEET_ORT_LIB=$dir/fifo timeout 60 "$cli" serve --detach --devices cpu --socket "$dir/fifo.sock" >"$dir/fifo.out" 2>"$dir/fifo.err" || rc=$?
[ "$rc" = 1 ] || fail "serve --detach with a FIFO runtime exited $rc"
one_error_line "$dir/fifo.err" || fail "not one error line"
grep -q "(from ORTFLEET_ORT_LIB) is a named pipe" "$dir/fifo.err" || fail "the error does not say where the runtime came from"
! grep -q "serves on" "$dir/fifo.out" || fail "it said the pool serves"
[ ! -e "$dir/fifo.sock" ] || fail "a socket was left"

# 2. Workers that cannot start (a worker executable that exits at once; the daemon itself is the real one).
cat >"$dir/refusing-worker" <<SCRIPT
#!/bin/sh
case "\$1" in --pool-daemon=*) exec "$worker" "\$@";; esac
echo "ortfleet: this worker refuses to start" >&2
exit 1
SCRIPT
chmod +x "$dir/refusing-worker"
rc=0; ORTFLEET_WORKER=$dir/refusing-worker timeout 120 "$cli" serve --detach --devices 'cpu*2' --socket "$dir/d.sock" >"$dir/detach.out" 2>"$dir/detach.err" || rc=$?
[ "$rc" = 1 ] || fail "serve --detach with no worker started exited $rc"
one_error_line "$dir/detach.err" || fail "serve --detach: not one error line"
grep -q "no worker of the warm pool started, so it serves nothing: the worker process for cpu exited with code 1" "$dir/detach.err" ||
  fail "serve --detach: the error does not give the workers' reason"
! grep -q "serves on" "$dir/detach.out" || fail "serve --detach said the pool serves"
for _ in $(seq 1 100); do [ -e "$dir/d.sock" ] || break; sleep 0.1; done
[ ! -e "$dir/d.sock" ] || fail "the daemon with no worker still listens"
grep -q -- "--strategy threads" "$dir/d.sock.log" || fail "the pool's log does not say the setting as its flag"
! grep -q '`strategy' "$dir/d.sock.log" || fail "the pool's log says a setting unrendered"

# 3. The same in the foreground.
rc=0; ORTFLEET_WORKER=$dir/refusing-worker timeout 120 "$cli" serve --devices cpu --socket "$dir/f.sock" 2>"$dir/foreground.err" || rc=$?
[ "$rc" = 1 ] || fail "serve with no worker started exited $rc"
grep -q "^ortfleet: error: no worker of the warm pool started" "$dir/foreground.err" || fail "serve: no error line"
[ ! -e "$dir/f.sock" ] || fail "serve with no worker left its socket"
echo "ok: serve with no worker started fails (a FIFO runtime at once, refusing workers once they failed), exit 1, one line"
