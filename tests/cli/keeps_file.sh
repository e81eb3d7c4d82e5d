#!/usr/bin/env bash
# keeps_file.sh FILE -- COMMAND...: runs COMMAND (its output and exit code pass through), then fails
# with exit code 99 when FILE's bytes or kind changed: a refused command must leave the user's file
# as it was. Combine with expect.sh: expect.sh 1 REGEX -- keeps_file.sh FILE -- ortfleet ...
set -u
file=$1; shift
[ "$1" = "--" ] && shift
before=$(stat -c %F "$file" 2>&1; sha256sum "$file" 2>&1)
"$@"; code=$?
after=$(stat -c %F "$file" 2>&1; sha256sum "$file" 2>&1)
if [ "$before" != "$after" ]; then
  echo "keeps_file.sh: $file changed: before: $before; after: $after"
  exit 99
fi
exit $code
