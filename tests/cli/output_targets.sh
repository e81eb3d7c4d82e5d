#!/usr/bin/env bash
# output_targets.sh WORK INPUT -- COMMAND... : runs COMMAND with each of its outputs (the arguments
# @1@, @2@, ...) pointed at what a user's path may hold, and checks the promises docs/guarantees.md
# makes for every output of every command:
#   input   the file the command reads (INPUT; - for none), as one output: refused (exit 1), left as it was;
#   empty   '' as one output: a usage error (exit 2) saying it is empty;
#   folder  a folder as one output: refused, "it is a folder", left as it was;
#   file    a user's 0600 file as every output: replaced keeping mode 0600 and owner, or refused and left
#           as it was (an output that replaces only its own kind: cache export);
#   link    a symbolic link to such a file as every output: the link stays, pointing where it pointed;
#   pipe    a named pipe no process reads as every output: an error at once (never a wait), still a pipe;
#   device  a null device node (mknod c 1 3; root only) as every output: written, still that device.
# Each run has a deadline (a command that waits forever fails the test). Exit 0 when every case holds.
set -u
work=$1 input=$2; shift 2
[ "$1" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=keeps_file.sh
source "$here/keeps_file.sh"
scratch=$(mktemp -d "$work/targets.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
outputs=0
for arg in "$@"; do
  while [[ $arg =~ @([0-9])@ ]]; do
    [ "${BASH_REMATCH[1]}" -gt "$outputs" ] && outputs=${BASH_REMATCH[1]}
    arg=${arg/"${BASH_REMATCH[0]}"/}
  done
done
[ "$outputs" -gt 0 ] || { echo "output_targets.sh: no @1@ in the command"; exit 2; }
failures=0
fail() { echo "FAILED [$case]: $*"; echo "--- stdout:"; cat "$scratch/out"; echo "--- stderr:"; cat "$scratch/err"; failures=$((failures + 1)); }

# run_with PATH1 PATH2 ...: the command with @i@ replaced by PATHi; sets $code.
run_with() {
  local args=() arg i
  for arg in "${cmd[@]}"; do
    for ((i = 1; i <= outputs; i++)); do arg=${arg//@$i@/${!i}}; done
    args+=("$arg")
  done
  timeout -k 5 300 "${args[@]}" >"$scratch/out" 2>"$scratch/err"
  code=$?
}
cmd=("$@")
# (bench and tune say their plan first, "bench: N cases ...", "tune: N configurations ...": notices, not part of the error)
one_error_line() { [ "$(grep -c '^ortfleet: error:' "$scratch/err")" -eq 1 ] && [ "$(grep -vcE '^(bench|tune): ' "$scratch/err")" -eq 1 ]; }
# fresh NAME: a path in a new folder, nothing at it.
fresh() { mkdir -p "$scratch/$1"; echo "$scratch/$1/out"; }

# One output at a time: the input itself, '' and a folder are refused before any work.
for ((n = 1; n <= outputs; n++)); do
  for case in input empty folder; do
    [ "$case" = input ] && [ "$input" = - ] && continue
    paths=()
    for ((i = 1; i <= outputs; i++)); do paths+=("$(fresh "$case-$n-$i")"); done
    case $case in
      input) target=$input ;;
      empty) target="" ;;
      folder) target="$scratch/folder-$n"; mkdir -p "$target"; touch "$target/a-file" ;;
    esac
    paths[n - 1]=$target
    before=$(file_state "${target:-/nonexistent}")
    run_with "${paths[@]}"
    case=$case-$n
    if [ "${target}" = "" ]; then
      [ "$code" -eq 2 ] && grep -q "is empty" "$scratch/err" && one_error_line || fail "exit $code, expected a one-line usage error saying it is empty"
    else
      [ "$code" -eq 1 ] && one_error_line || fail "exit $code, expected a one-line refusal"
      [ "$(file_state "$target")" = "$before" ] || fail "$target changed"
    fi
  done
done

# Every output at once: a user's file, a link to one, a pipe nobody reads, a device.
kinds=(file link pipe)
[ "$(id -u)" -eq 0 ] && kinds+=(device) || echo "output_targets.sh: not root: no device node case"
for case in "${kinds[@]}"; do
  paths=()
  for ((i = 1; i <= outputs; i++)); do
    dir="$scratch/$case-$i"; mkdir -p "$dir"
    case $case in
      file) printf 'my notes %s\n' "$i" > "$dir/notes"; chmod 600 "$dir/notes"; paths+=("$dir/notes") ;;
      link) printf 'my notes %s\n' "$i" > "$dir/notes"; chmod 600 "$dir/notes"; ln -s "$dir/notes" "$dir/link"; paths+=("$dir/link") ;;
      pipe) mkfifo "$dir/pipe"; paths+=("$dir/pipe") ;;
      device) mknod "$dir/null" c 1 3; paths+=("$dir/null") ;;
    esac
  done
  befores=()
  for p in "${paths[@]}"; do befores+=("$(file_state "$p")"); done
  run_with "${paths[@]}"
  [ "$code" -ne 124 ] && [ "$code" -ne 137 ] || { fail "it did not end within 300 s"; continue; }
  for ((i = 0; i < outputs; i++)); do
    p=${paths[i]} now=$(file_state "${paths[i]}")
    case $case in
      file)
        [ "$(stat -c '%a %u' "$p")" = "600 $(id -u)" ] && [ -f "$p" ] || fail "$p is now $now"
        [ "$code" -eq 0 ] || { one_error_line && [ "$now" = "${befores[i]}" ]; } || fail "refused, but $p changed or the error is not one line" ;;
      link)
        [ -L "$p" ] && [ "$(readlink "$p")" = "$(dirname "$p")/notes" ] || fail "the link $p is now $now"
        [ "$(stat -L -c '%a' "$p")" = 600 ] || fail "what $p names lost its mode" ;;
      pipe)
        [ "$now" = "${befores[i]}" ] || fail "$p is now $now"
        [ "$code" -eq 1 ] && one_error_line && grep -q "named pipe no process reads" "$scratch/err" || fail "exit $code, expected one line saying no process reads the pipe" ;;
      device)
        [ "$now" = "${befores[i]}" ] || fail "$p is now $now"
        [ "$code" -eq 0 ] || fail "exit $code writing into a null device" ;;
    esac
  done
  # Nothing left beside them (a partial file of a failed write).
  for ((i = 1; i <= outputs; i++)); do
    left=$(find "$scratch/$case-$i" -mindepth 1 -name '.*' | head -1)
    [ -z "$left" ] || fail "$left was left behind"
  done
done
[ "$failures" -eq 0 ] && echo "ok: every output of: $*"
exit $((failures > 0))
