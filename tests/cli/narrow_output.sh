#!/usr/bin/env bash
# narrow_output.sh EXIT_CODE -- COMMAND...: runs COMMAND, checks its exit code and its tables (stdout, a
# pipe): every line of a table (its header, its rule of dashes, its rows) at most 100 characters, each
# row one line, and a free-text column too wide for that (a failed device's error) under the table,
# one whole line per row ("cpu:1: ..."), so that grep and copy-paste see an error and its paths whole.
set -u
want=$1; shift
[ "$1" = "--" ] && shift
out=$(mktemp); trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>/dev/null; got=$?
[ "$got" -eq "$want" ] || { echo "FAILED: exit code $got, expected $want: $*"; cat "$out"; exit 1; }
/usr/bin/python3 - "$out" <<'PY' || exit 1
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
problems, rows = [], 0
for i, rule in enumerate(lines):
    if i == 0 or not rule.startswith("-") or set(rule) - {"-", " "}:
        continue
    table = [lines[i - 1], rule]
    for line in lines[i + 1:]:
        if not line.strip():
            break
        table.append(line)
    rows += len(table) - 2
    problems += [f"a table line of {len(l)} characters: {l}" for l in table if len(l) > 100]
    # A row is one line: it starts with its first cell (a continuation line would start blank).
    problems += [f"a row that is not one line: {l!r}" for l in table[2:] if l.startswith(" ")]
# Each failed device's error, under the table, on one line of its own ("  cpu:1: ..."), followed by
# another such line or a blank one (a wrapped error would go on, indented).
failed = [l.split()[0] for l in lines if re.match(r"\S+\s+failed\b", l)]
for device in failed:
    at = [k for k, l in enumerate(lines) if l.startswith(f"  {device}: ")]
    after = lines[at[0] + 1] if at and at[0] + 1 < len(lines) else ""
    if len(at) != 1 or not (after == "" or re.match(r"  \S+: ", after)):
        problems.append(f"the error of {device} is not one whole line under the table")
if problems or not rows:
    print("FAILED: " + ("no table" if not rows else "\n".join(problems)))
    print("\n".join(lines))
    sys.exit(1)
print(f"ok: {rows} table rows, each one line within 100 characters; {len(failed)} errors under the table, one line each")
PY
