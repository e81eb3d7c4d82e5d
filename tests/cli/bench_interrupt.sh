#!/usr/bin/env bash
# Ctrl-C on `ortfleet bench`, as a terminal sends it (SIGINT to the whole foreground process group, the
# bench's workers included), once a case runs: the bench says so in one line, exits 130 and leaves
# nothing behind (no file in its TMPDIR: before, ortfleet-bench-pool-*/pool.sock and
# ortfleet-start-config-*/config.json stayed; no process of it). Then a bench started with SIGINT
# ignored (a script's background job): the same SIGINT ends none of its processes, and it runs to the end.
# Usage: bench_interrupt.sh ORTFLEET MODEL
set -euo pipefail
cli=$1 model=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ortfleet-bench-interrupt.XXXXXX")
mark=BENCH_INTERRUPT_$$_$RANDOM
marked() {  # processes of this test's benches that still run
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "BENCH_INTERRUPT_MARK=$mark"; then echo "${p#/proc/}"; fi
  done
}
cleanup() {
  local p
  for p in $(marked); do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "bench_interrupt.sh: FAILED: $*" >&2; [ -f "$tmp/err" ] && sed 's/^/  stderr: /' "$tmp/err" >&2; exit 1; }
mkdir -p "$tmp/tmp" "$tmp/run"
chmod 700 "$tmp/run"
# A process group of its own, led by the bench, with SIGINT at its default or ignored, as `$1` says.
launch() {
  local sigint=$1
  shift
  env TMPDIR="$tmp/tmp" ORTFLEET_CACHE="$tmp/cache" XDG_RUNTIME_DIR="$tmp/run" BENCH_INTERRUPT_MARK="$mark" \
    python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == "ignored" else signal.SIG_DFL)
os.setpgid(0, 0)
os.execvp(sys.argv[2], sys.argv[2:])' "$sigint" "$cli" bench "$model" --devices cpu --no-anchors "$@" >"$tmp/out" 2>"$tmp/err" &
  bench=$!
}
# Waits up to 60 s for a case's start to run (its config folder appears beside the warm pool's).
await_a_case() {
  for _ in $(seq 1 600); do
    if compgen -G "$tmp/tmp/ortfleet-start-config-*" >/dev/null && compgen -G "$tmp/tmp/ortfleet-bench-pool-*" >/dev/null; then return 0; fi
    kill -0 "$bench" 2>/dev/null || fail "the bench ended before a case ran"
    sleep 0.1
  done
  fail "no case ran within 60 s"
}

# 1. Ctrl-C: one line, exit 130, nothing left.
launch default --runs 50 --budget 0
await_a_case
kill -INT -- "-$bench"
rc=0
wait "$bench" || rc=$?
[ "$rc" = 130 ] || fail "the interrupted bench exited $rc, not 130"
said=$(grep -c 'interrupted' "$tmp/err" || true)
[ "$said" = 1 ] || fail "the bench said it was interrupted in $said lines, not one"
grep -qx 'ortfleet: bench interrupted by Ctrl-C (SIGINT): its processes stopped and its temporary files removed' "$tmp/err" ||
  fail "the bench did not say it was interrupted"
left=$(ls -A "$tmp/tmp")
[ -z "$left" ] || fail "the interrupted bench left in TMPDIR: $left"
for _ in $(seq 1 100); do [ -z "$(marked)" ] && break; sleep 0.1; done
[ -z "$(marked)" ] || fail "processes of the interrupted bench still run: $(for p in $(marked); do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"
echo "bench_interrupt.sh: Ctrl-C: one line, exit 130, nothing left"

# 2. Started with SIGINT ignored: the same SIGINT leaves it and its workers running, and it ends as it would have.
launch ignored --runs 2 --budget 0 --no-next-job
await_a_case
kill -INT -- "-$bench"
rc=0
wait "$bench" || rc=$?
[ "$rc" = 0 ] || fail "the bench started with SIGINT ignored exited $rc (a row failed, or it was stopped), not 0"
grep -q 'interrupted' "$tmp/err" && fail "the bench started with SIGINT ignored said it was interrupted"
echo "bench_interrupt.sh: ok (a bench started with SIGINT ignored ran to its end, every row ok)"
