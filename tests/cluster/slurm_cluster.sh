#!/usr/bin/env bash
# slurm_cluster.sh start DIR | stop DIR | env DIR
# A one-node Slurm cluster (this machine) from Debian's packages, run as root from the private folder
# DIR: a fresh munge key, a minimal slurm.conf (no accounting, proctrack/linuxproc, select/cons_tres,
# the node and the controller at 127.0.0.1 so that no name needs resolving), munged, slurmctld and
# slurmd started without systemd on free ports. `start` returns once `sinfo`
# shows the node idle and prints the variables a client needs (`eval "$(slurm_cluster.sh env DIR)"`);
# `stop` ends the three daemons by the pids they wrote, and nothing else. It installs nothing: where
# the commands are missing or this is not root it exits 77 (skip), saying why.
set -uo pipefail
action=${1:-} dir=${2:-}
[ -n "$action" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }

skip() { echo "SKIP: $*" >&2; exit 77; }
say() { echo "slurm_cluster: $*" >&2; }

client_env() {
  echo "export SLURM_CONF=$dir/etc/slurm.conf"
}

stop() {
  local name pid
  for name in slurmd slurmctld munged; do
    [ -f "$dir/run/$name.pid" ] || continue
    pid=$(cat "$dir/run/$name.pid" 2>/dev/null) || continue
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || continue
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$dir/run/$name.pid"
  done
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  [ "$(id -u)" -eq 0 ] || skip "a Slurm cluster needs root (slurmd starts jobs as their users)"
  local missing=() c
  for c in munged mungekey slurmctld slurmd sinfo srun sbatch scancel scontrol squeue; do
    command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] || skip "Slurm is not installed (missing: ${missing[*]}; apt-get install slurm-wlm munge)"
  export PATH=$PATH:/usr/sbin
  mkdir -p "$dir"/{etc,run,log,state,spool,munge} && chmod 700 "$dir" "$dir/munge" "$dir/etc"
  # munged refuses a key that others can read, and a socket folder others can write.
  rm -f "$dir/etc/munge.key"
  mungekey --create --keyfile="$dir/etc/munge.key" --bits=1024 >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/etc/munge.key" bs=1 count=1024 2>/dev/null
  chmod 400 "$dir/etc/munge.key"
  munged --key-file="$dir/etc/munge.key" --socket="$dir/munge/munge.socket" --pid-file="$dir/run/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force 2>"$dir/log/munged.err" ||
    { say "munged did not start: $(cat "$dir/log/munged.err")"; return 1; }

  local host ctld_port d_port cpus mem
  host=$(hostname -s)
  ctld_port=$(free_port) d_port=$(free_port)
  cpus=$(nproc --all)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  cat >"$dir/etc/slurm.conf" <<CONF
ClusterName=ortfleet-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF=$dir/etc/slurm.conf
  slurmctld -c -f "$SLURM_CONF" 2>"$dir/log/slurmctld.err" || { say "slurmctld did not start: $(cat "$dir/log/slurmctld.err")"; return 1; }
  slurmd -c -f "$SLURM_CONF" 2>"$dir/log/slurmd.err" || { say "slurmd did not start: $(cat "$dir/log/slurmd.err")"; return 1; }
  for _ in $(seq 1 300); do
    if [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; then client_env; return 0; fi
    sleep 0.2
  done
  say "the node never became idle: $(sinfo 2>&1 | tail -2); slurmctld log: $(tail -5 "$dir/log/slurmctld.log" 2>/dev/null); slurmd log: $(tail -5 "$dir/log/slurmd.log" 2>/dev/null)"
  return 1
}

case $action in
  start) start || { stop; exit 1; } ;;
  stop) stop ;;
  env) client_env ;;
  *) echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac
