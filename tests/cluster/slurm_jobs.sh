#!/usr/bin/env bash
# slurm_jobs.sh ORTFLEET MODEL EXAMPLE WARM_NODE_EXAMPLE: ortfleet under a real Slurm (a one-node cluster of this machine,
# slurm_cluster.sh), on the CPU, as a cluster user meets it:
#   1. two steps of one job: the first start is cold and leaves the job's warm pool, the second starts
#      on it (its JSON says resident, on pool-job<ID>.sock), an `srun --overlap` step too; --devices all
#      says what Slurm gave; once the job ends, nothing of it runs any more (the pool ended with it);
#   2. a job array whose tasks start the same model: every task a hit from the shared layer, which no
#      task wrote;
#   3. a job cancelled with scancel while its start is under way: nothing of it left running, no partial
#      cache entry;
#   4. the sbatch example of docs/serving.md (EXAMPLE), as written there;
#   5. its warm-node example (WARM_NODE_EXAMPLE): `ortfleet serve --detach` first, the first step on it.
# Skips (exit 77, saying why) where Slurm is not installed or this is not root.
set -uo pipefail
cli=$(readlink -f "$1") model=$(readlink -f "$2") example=$(readlink -f "$3") warm_node_example=$(readlink -f "$4")
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/ortfleet-slurm-XXXXXX)
chmod 755 "$dir"
cluster=$dir/cluster
"$here/slurm_cluster.sh" start "$cluster" >"$dir/cluster.env"
rc=$?
if [ "$rc" -eq 77 ]; then rm -rf "$dir"; exit 77; fi
fail() {
  echo "FAILED: $*"
  for f in "$dir"/*.out "$dir"/*.err "$dir"/run/ortfleet/*.log; do [ -s "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
[ "$rc" -eq 0 ] || { "$here/slurm_cluster.sh" stop "$cluster"; fail "the Slurm cluster did not start"; }
# shellcheck disable=SC1091
source "$dir/cluster.env"
jobs_of_test=()
cleanup() {
  for j in "${jobs_of_test[@]}"; do scancel "$j" 2>/dev/null; done
  for socket in "$dir"/run/ortfleet/*.sock; do [ -S "$socket" ] && ortfleet -q pool stop --socket "$socket" >/dev/null 2>&1; done
  "$here/slurm_cluster.sh" stop "$cluster"
  rm -rf "$dir"
}
trap cleanup EXIT

export PATH=$(dirname "$cli"):$PATH
unset ORTFLEET_AUTO_POOL ORTFLEET_WARM_POOL_IDLE ORTFLEET_CACHE_SHARED
mkdir -m 700 "$dir/run"
export XDG_RUNTIME_DIR=$dir/run ORTFLEET_CACHE=$dir/cache
# Waits up to $2 tenths of a second for the condition $1 (a shell command).
await() { for _ in $(seq 1 "$2"); do eval "$1" && return 0; sleep 0.1; done; return 1; }
# The processes whose environment says they belong to Slurm job $1.
processes_of_job() {
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' <"$p/environ" | grep -qx "SLURM_JOB_ID=$1" && echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline")"; } 2>/dev/null
  done
}
submit() { sbatch --parsable "$@" | cut -d';' -f1; }

# 1. Two steps of one job on one node share the job's pool.
cat >"$dir/steps.sh" <<EOF
#!/bin/bash
srun -n1 ortfleet --json start "$model" >"$dir/step1.json" 2>"$dir/step1.err"
# The pool makes the model's entry and loads it: wait until it holds the session.
for i in \$(seq 1 600); do ortfleet -q pool status --json 2>/dev/null | grep -q '"model": "$model"' && break; sleep 0.1; done
srun -n1 ortfleet --json start "$model" >"$dir/step2.json" 2>"$dir/step2.err"
srun -n1 --overlap ortfleet start "$model" >"$dir/step3.out" 2>"$dir/step3.err"
EOF
job=$(submit --wait -o "$dir/steps.out" "$dir/steps.sh") || fail "the two-step job failed"
jobs_of_test+=("$job")
grep -q '"resident": false' "$dir/step1.json" || fail "step 0 was no cold start: $(cat "$dir/step1.json")"
grep -q "\"devices_reason\": \"the CPU ([0-9]* CPUs\? of this node): Slurm gave job $job step 0 no GPU" "$dir/step1.json" ||
  fail "step 0 does not say what Slurm gave: $(grep devices_reason "$dir/step1.json")"
grep -q "left a warm pool for the later steps of Slurm job $job on this node" "$dir/step1.err" || fail "step 0 left no pool: $(cat "$dir/step1.err")"
grep -q '"resident": true' "$dir/step2.json" || fail "step 1 did not start on the pool step 0 left: $(grep -E 'resident|strategy_reason' "$dir/step2.json")"
grep -q "auto chose the warm worker pool on $dir/run/ortfleet/pool-job$job.sock" "$dir/step2.json" || fail "step 1 does not say it used the job's pool"
head -1 "$dir/step3.out" | grep -q "Slurm gave job $job step 2 no GPU" || fail "the overlapping step's first line: $(head -1 "$dir/step3.out")"
grep -q "^cpu .* resident " "$dir/step3.out" || fail "the overlapping step was not on the pool: $(cat "$dir/step3.out")"
await '[ -z "$(processes_of_job "$job")" ]' 100 || fail "job $job ended, but these of its processes still run: $(processes_of_job "$job")"
[ ! -e "$dir/run/ortfleet/pool-job$job.sock" ] || fail "the job's pool socket is still there"
grep -q "Slurm job $job has no step left on this node: exiting with it" "$dir/run/ortfleet/pool-job$job.sock.log" || fail "the pool's log does not say it ended with the job"
echo "ok: two steps of job $job, the second on the first's pool, which ended with the job"

# 2. A job array: every task finds the model in the shared layer.
ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=$dir/maker ortfleet start "$model" --devices cpu --model-cache-fill inline >/dev/null 2>&1 ||
  fail "the entry was not made"
ORTFLEET_CACHE=$dir/maker ortfleet -q cache export "$model" --out "$dir/model.ortfleet" >/dev/null || fail "export failed"
ortfleet -q cache import "$dir/model.ortfleet" --shared "$dir/shared" >/dev/null || fail "import --shared failed"
shared_state() { (cd "$dir/shared" && find . -printf '%p %s %T@ %C@\n' | sort); }
before=$(shared_state)
cat >"$dir/array.sh" <<EOF
#!/bin/bash
ORTFLEET_CACHE=$dir/task-\$SLURM_ARRAY_TASK_ID ortfleet --json start "$model" >"$dir/task-\$SLURM_ARRAY_TASK_ID.json" 2>"$dir/task-\$SLURM_ARRAY_TASK_ID.err"
EOF
job=$(ORTFLEET_CACHE_SHARED=$dir/shared ORTFLEET_AUTO_POOL=0 submit --wait -a 0-3 -o "$dir/array-%a.out" "$dir/array.sh") || fail "the array job failed"
jobs_of_test+=("$job")
for t in 0 1 2 3; do
  grep -q '"model_cache": "hit"' "$dir/task-$t.json" || fail "array task $t was no hit: $(grep model_cache "$dir/task-$t.json")"
  grep -q "\"model_cache_note\": \"from the shared layer $dir/shared\"" "$dir/task-$t.json" || fail "array task $t did not load from the shared layer"
done
[ "$(shared_state)" = "$before" ] || fail "the array's tasks wrote into the shared layer"
echo "ok: 4 array tasks of job $job, every one a hit from the shared layer"

# 3. scancel while the start is under way: the second device's worker is held in its start.
cat >"$dir/cancel.sh" <<EOF
#!/bin/bash
ORTFLEET_TEST_WORKER_START_DELAY=cpu:1=600 ortfleet start "$model" --devices 'cpu*2' --strategy processes --model-cache --model-cache-fill inline
EOF
# Two CPUs for two CPU devices: ortfleet refuses more CPU sessions than the cores Slurm gave the job.
job=$(ORTFLEET_CACHE=$dir/cancel-cache submit --cpus-per-task=2 -o "$dir/cancel.out" "$dir/cancel.sh") || fail "the job to cancel was not submitted"
jobs_of_test+=("$job")
await '[ "$(processes_of_job "$job" | grep -c "ortfleet-worker --channel-fd")" -ge 2 ]' 600 ||
  fail "the job's start never had its two workers: $(processes_of_job "$job")"
await 'ls "$dir"/cancel-cache/models/*.manifest.json >/dev/null 2>&1' 600 || fail "the first device's start never made its entry"
scancel "$job" || fail "scancel failed"
await '[ -z "$(squeue -h -j "$job" 2>/dev/null)" ]' 600 || fail "job $job is still there after scancel: $(squeue -j "$job")"
await '[ -z "$(processes_of_job "$job")" ]' 100 || fail "cancelled job $job left these running: $(processes_of_job "$job")"
for f in "$dir"/cancel-cache/models/*; do
  case "$f" in
    *.partial-*) fail "the cancelled job left a partial entry file: $f" ;;
    *.onnx | *.ort) [ -f "$f.manifest.json" ] || fail "the cancelled job left $f without its manifest" ;;
  esac
done
ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=$dir/cancel-cache ortfleet --json start "$model" --devices cpu --model-cache-fill off >"$dir/after-cancel.json" 2>"$dir/after-cancel.err" ||
  fail "a start after the cancelled job failed"
grep -q "damaged" "$dir/after-cancel.err" && fail "the cancelled job left a damaged entry: $(cat "$dir/after-cancel.err")"
echo "ok: job $job cancelled while starting left nothing running and no partial entry"

# 4. The example of docs/serving.md, as it is written there.
(cd "$dir" && MODEL=$model submit --wait "$example" >"$dir/example.jobid") || fail "the example job failed: $(cat "$dir"/ortfleet-steps-*.out)"
job=$(cat "$dir/example.jobid")
jobs_of_test+=("$job")
out=$dir/ortfleet-steps-$job.out
[ "$(grep -c "^cpu .* ready " "$out")" -ge 2 ] || fail "the example did not start twice: $(cat "$out")"
grep -q "^auto chose the warm worker pool on $dir/run/ortfleet/pool-job$job.sock" "$out" || fail "the example's second start was not on the job's pool: $(cat "$out")"
[ "${ORTFLEET_SHOW_EXAMPLE:-0}" = 1 ] && cat "$out"
echo "ok: the sbatch example of docs/serving.md ran (job $job)"

# 5. The warm-node example of docs/serving.md: the job's daemon, started first, serves its first step.
(cd "$dir" && MODEL=$model submit --wait "$warm_node_example" >"$dir/warm.jobid") || fail "the warm-node job failed: $(cat "$dir"/ortfleet-warm-node-*.out)"
job=$(cat "$dir/warm.jobid")
jobs_of_test+=("$job")
out=$dir/ortfleet-warm-node-$job.out
grep -q "^auto chose the warm worker pool on $dir/run/ortfleet/pool-job$job.sock" "$out" || fail "the first step did not start on the job's daemon: $(cat "$out")"
grep -q "^cpu .* ready " "$out" || fail "the first step did not start: $(cat "$out")"
echo "ok: the warm-node example ran (job $job): its first step started on the daemon the job script started"
