#!/usr/bin/env bash
# ctrl_c.sh ORTFLEET MODEL: Ctrl-C (SIGINT to the command's process group, as a terminal sends it) stops
# bench, profile, tune and `doctor MODEL` in order: the start under way and what the run set up (a bench's warm pools,
# their workers, its folders in $TMPDIR) are taken down, nothing is left running or in $TMPDIR, and the
# command ends by SIGINT, as a shell expects of Ctrl-C. Each died at once and left them (issue 58's audit;
# doctor's start left its config's folder, ortfleet-start-config-*, until its re-audit).
set -uo pipefail
cli=$1 model=$2
dir=$(mktemp -d)
export ORTFLEET_CACHE=$dir/cache ORTFLEET_AUTO_POOL=0 ORTFLEET_TEST_MARK="ctrl-c-$$"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
await() { for _ in $(seq 1 "$2"); do eval "$1" && return 0; sleep 0.1; done; return 1; }
marked() { for p in /proc/[0-9]*; do { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "ORTFLEET_TEST_MARK=$ORTFLEET_TEST_MARK" && echo "${p#/proc/}"; done; }
set -m  # each job in a process group of its own, SIGINT at its default: as a terminal's foreground job

# Each is interrupted once its run is under way: bench once its pools (next job, parked pool, node
# daemon) may run, profile and tune inside their starts.
# profile runs the segmenter, whose 9,999 timed runs keep its child busy for a while; doctor the
# segmenter at 2048 x 2048, whose warm-up takes seconds.
"$cli" -q synth segmenter "$dir/segmenter.onnx" >/dev/null || fail "synth segmenter failed"
while IFS='|' read -r name command said; do
  case $name in profile|doctor) run_model=$dir/segmenter.onnx;; *) run_model=$model;; esac
  tmp=$dir/tmp-$name
  mkdir -p "$tmp"
  TMPDIR=$tmp "$cli" $command "$run_model" >"$dir/$name.out" 2>"$dir/$name.err" &
  job=$!
  # Under way: it said so (bench, tune), and a child of its own runs (its start).
  await "{ [ -z \"$said\" ] || grep -q \"$said\" \"$dir/$name.err\"; } && [ -n \"\$(marked | grep -vx $job)\" ]" 600 || fail "$name did not get going: $(cat "$dir/$name.err")"
  sleep 0.3
  kill -INT -- "-$job"
  wait "$job" 2>/dev/null
  rc=$?
  [ "$rc" -eq 130 ] || fail "$name ended with $rc, not by SIGINT (130): $(tail -3 "$dir/$name.err")"
  await '[ -z "$(marked)" ]' 100 || fail "$name left processes running: $(marked | xargs -r ps -o pid,args -p)"
  left=$(ls -A "$tmp")
  [ -z "$left" ] || fail "$name left in TMPDIR: $left"
done <<'CASES'
bench|bench --devices cpu --runs 20 --no-anchors|rounds of
profile|profile --device cpu --runs 9999|
tune|tune --device cpu --quick --repeat 20|configurations
doctor|doctor --device cpu --shapes image=1x3x2048x2048|
CASES
echo "ok: Ctrl-C stops bench, profile, tune and doctor MODEL in order, leaving nothing running and nothing in TMPDIR"
