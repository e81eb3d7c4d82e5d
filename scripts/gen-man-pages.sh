#!/usr/bin/env bash
# Writes man pages from the CLI's own --help with help2man: ortfleet.1, and ortfleet-SUB.1 (and
# ortfleet-SUB-SUBSUB.1) for every subcommand, as git does. The build runs it when help2man is
# installed (cmake/OrtfleetManPages.cmake); `cmake --install` puts the pages in share/man/man1.
# Every page gets the sections --help cannot carry from scripts/man/: EXIT STATUS, ENVIRONMENT and SEE
# ALSO (common.h2m), and EXAMPLES of its command (examples/ortfleet-SUB.h2m, where there is one).
# Usage: scripts/gen-man-pages.sh ORTFLEET_BINARY OUT_DIR VERSION
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 ORTFLEET_BINARY OUT_DIR VERSION" >&2; exit 2; }
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); out=$2; version=$3
sections=$(cd "$(dirname "$0")/man" && pwd)
command -v help2man >/dev/null || { echo "$0: help2man is not installed (apt-get install help2man)" >&2; exit 1; }
mkdir -p "$out"
wrappers=$(mktemp -d); trap 'rm -rf "$wrappers"' EXIT

# The help of `ortfleet WORDS...` as a user who typed "ortfleet" sees it (as in gen-cli-reference.sh).
help_of() {
  env -i PATH=/usr/bin:/bin HOME=/nonexistent 'XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR' \
    bash -c 'exec -a ortfleet "$0" "$@"' "$bin" "$@" --help 2>&1
}
subcommands_of() {
  awk 'tolower($0) ~ /^subcommands:/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }'
}

page() {  # page WORDS...: one man page, through a wrapper named like the page (ortfleet-bench)
  local name
  name=$(echo "ortfleet $*" | sed -e 's/ *$//' -e 's/ /-/g')
  {
    echo '#!/usr/bin/env bash'
    echo "env -i PATH=/usr/bin:/bin HOME=/nonexistent 'XDG_RUNTIME_DIR=\$XDG_RUNTIME_DIR' bash -c 'exec -a ortfleet \"\$0\" \"\$@\"' '$bin' $* \"\$@\""
  } > "$wrappers/$name"
  chmod +x "$wrappers/$name"
  local description
  description=$(help_of "$@" | sed -n -e '1{s/^ortfleet: //;p;}')  # sed reads it all: head would leave the help's writer a closed pipe (SIGPIPE under pipefail)
  local include="$wrappers/$name.h2m"
  cat "$sections/common.h2m" > "$include"
  if [ -f "$sections/examples/$name.h2m" ]; then cat "$sections/examples/$name.h2m" >> "$include"; fi
  help2man --no-info --no-discard-stderr --version-string="$version" --help-option=--help \
    --name="$description" --section=1 --source="ortfleet $version" --manual="ortfleet manual" \
    --include="$include" --output="$out/$name.1" "$wrappers/$name"
  local sub
  for sub in $(help_of "$@" | subcommands_of); do page "$@" "$sub"; done
}
page
