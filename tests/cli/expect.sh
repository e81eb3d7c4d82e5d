#!/usr/bin/env bash
# expect.sh EXIT_CODE REGEX -- COMMAND...
# Runs COMMAND and checks its exit code and that its output (stdout and stderr) matches REGEX.
# Failures (exit 1) and usage errors (exit 2) must also print their error as exactly one line on
# stderr; a usage error's line is a sentence of at most 200 characters.
set -u
want=$1 pattern=$2; shift 2
[ "$1" = "--" ] && shift
out=$(mktemp); err=$(mktemp); trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"; got=$?
fail() { echo "FAILED: $*"; echo "--- command: $*"; echo "--- stdout:"; cat "$out"; echo "--- stderr:"; cat "$err"; exit 1; }
[ "$got" -eq "$want" ] || fail "exit code $got, expected $want: $*"
grep -Eq -- "$pattern" "$out" "$err" 2>/dev/null || cat "$out" "$err" | grep -Eq -- "$pattern" || fail "output does not match /$pattern/"
if [ "$want" -eq 1 ] || [ "$want" -eq 2 ]; then
  lines=$(grep -c "^ortfleet: error:" "$err")
  [ "$lines" -eq 1 ] || fail "expected one error line on stderr, got $lines"
  [ "$(wc -l < "$err")" -eq 1 ] || fail "stderr has more than the one error line"
fi
if [ "$want" -eq 2 ]; then
  [ "$(wc -m < "$err")" -le 201 ] || fail "the usage error is longer than 200 characters"
fi
echo "ok: $*"
