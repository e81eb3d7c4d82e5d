#!/usr/bin/env bash
# keeps_file.sh FILE -- COMMAND...: runs COMMAND (its output and exit code pass through), then fails
# with exit code 99 when FILE changed (its kind, mode, owner, device numbers, link target or bytes): a
# refused command must leave the user's file as it was. Combine with expect.sh:
#   expect.sh 1 REGEX -- keeps_file.sh FILE -- ortfleet ...
# Sourced (tests/cli/output_targets.sh), it only defines file_state.
set -u

# What FILE is, in one line: never opened for reading unless it is a regular file (a pipe would block).
file_state() {
  local file=$1
  if [ ! -e "$file" ] && [ ! -L "$file" ]; then echo "absent"; return; fi
  printf '%s|%s|' "$(stat -c '%F %a %u:%g %t:%T' "$file")" "$(readlink "$file" 2>/dev/null)"
  if [ -f "$file" ] && [ ! -L "$file" ]; then sha256sum < "$file"; else echo; fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  file=$1; shift
  [ "$1" = "--" ] && shift
  before=$(file_state "$file")
  "$@"; code=$?
  after=$(file_state "$file")
  if [ "$before" != "$after" ]; then
    echo "keeps_file.sh: $file changed: before: $before; after: $after"
    exit 99
  fi
  exit $code
fi
