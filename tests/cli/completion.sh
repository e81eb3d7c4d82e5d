#!/usr/bin/env bash
# completion.sh ORTFLEET: the bash completion `ortfleet completion bash` prints, as bash uses it: a
# command from its first letters, a subcommand, a flag of that subcommand (and a global one), the
# choices of a flag that has them, device words for --devices.
set -euo pipefail
cli=$1
script=$(mktemp) files=$(mktemp -d); trap 'rm -rf "$script" "$files"' EXIT
"$cli" completion bash >"$script"
bash -n "$script" || { echo "FAILED: the script is not valid bash"; exit 1; }
# complete WORDS...: what bash offers for the last word of `ortfleet WORDS...`.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=(ortfleet "$@"); COMP_CWORD=$#; _ortfleet; printf "%s\n" "${COMPREPLY[@]}"' _ "$script" "$@"
}
expect() {  # expect "WORDS" WANTED: WANTED must be among the offers
  local offers; offers=$(complete_words $1)
  grep -qx -- "$2" <<<"$offers" || { echo "FAILED: 'ortfleet $1' offers [$(echo $offers)], not $2"; exit 1; }
}
expect "be" bench
expect "cache ex" export
expect "bench --inf" --inference
expect "bench --js" --json
expect "start --strategy f" fleet
expect "pool s" status
[ -z "$(complete_words "start --strategy x")" ] || { echo "FAILED: a choice that is none was offered"; exit 1; }
# --devices takes device words, not the files of the folder it runs in.
cd "$files" && touch call-me-a-device.txt
offers=$(complete_words start m.onnx --devices "")
grep -qx all <<<"$offers" && grep -qx cpu <<<"$offers" || { echo "FAILED: --devices offers [$(echo $offers)], not all and cpu"; exit 1; }
grep -q call-me <<<"$offers" && { echo "FAILED: --devices offered a file name: [$(echo $offers)]"; exit 1; }
expect "start m.onnx --devices c" cpu
expect "profile m.onnx --device c" cpu
expect "serve --devices a" all
[ -z "$(complete_words start m.onnx --devices ca)" ] || { echo "FAILED: --devices offered a file name"; exit 1; }
echo "ok: bash completion of commands, subcommands, flags and choices"
