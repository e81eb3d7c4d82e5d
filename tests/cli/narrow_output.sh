#!/usr/bin/env bash
# narrow_output.sh EXIT_CODE -- COMMAND...: runs COMMAND, checks its exit code and that no line of its
# output (stdout) is wider than 100 characters, the width every table of ortfleet keeps to (a long
# error or label wraps within its column).
set -u
want=$1; shift
[ "$1" = "--" ] && shift
out=$(mktemp); trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>/dev/null; got=$?
[ "$got" -eq "$want" ] || { echo "FAILED: exit code $got, expected $want: $*"; cat "$out"; exit 1; }
/usr/bin/python3 - "$out" <<'PY' || exit 1
import sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
wide = [l for l in lines if len(l) > 100]
if wide or not lines:
    print("FAILED: " + ("no output" if not lines else f"{len(wide)} line(s) wider than 100 characters, the widest {max(map(len, wide))}:"))
    print("\n".join(lines))
    sys.exit(1)
print(f"ok: {len(lines)} lines, the widest {max(map(len, lines))} characters")
PY
