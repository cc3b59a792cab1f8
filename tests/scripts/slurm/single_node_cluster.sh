# shellcheck shell=bash
# A throwaway single-node Slurm on this host, for the tests of scripts/slurm/ (source this file):
# Debian's slurm-wlm and munge (installed when missing), munged, slurmctld and slurmd started as
# root with their key, config, sockets, state, logs and ports in one temporary folder, beside any
# Slurm the host already runs. Each function returns non-zero with the reason in $cluster_why.
#   install_slurm                    apt-get update + install slurm-wlm and munge when missing
#   start_cluster DIR                starts the daemons; exports SLURM_CONF; sets cluster_partition
#   stop_cluster                     cancels the jobs, stops the daemons started here (by pid)
#   cluster_logs                     prints the tails of the daemons' logs

cluster_why="" cluster_dir="" cluster_partition=tilemix-test

install_slurm() {
  local missing=0 tool
  for tool in sbatch scontrol squeue slurmctld slurmd munged; do
    command -v "$tool" > /dev/null || missing=1
  done
  ((missing)) || return 0
  echo "slurm: installing slurm-wlm and munge"
  if ! apt-get update -qq || ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge > /dev/null; then
    cluster_why="apt-get could not install slurm-wlm and munge"
    return 1
  fi
}

# A TCP port of 127.0.0.1 that nothing listens on.
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 30000))
    (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null || { echo "$port"; return 0; }
  done
  return 1
}

# Waits up to $1 seconds for `$2...` to succeed.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

node_idle() { [[ $(sinfo -h -n "$cluster_node" -o %t 2> /dev/null) == idle ]]; }

start_cluster() {
  cluster_dir=$1
  cluster_node=$(hostname -s)
  mkdir -p "$cluster_dir"/{state,spool,log}
  head -c 1024 /dev/urandom > "$cluster_dir/munge.key"
  chmod 600 "$cluster_dir/munge.key"
  if ! munged --force --socket="$cluster_dir/munge.socket" --key-file="$cluster_dir/munge.key" \
      --pid-file="$cluster_dir/munged.pid" --seed-file="$cluster_dir/munged.seed" \
      --log-file="$cluster_dir/log/munged.log"; then
    cluster_why="munged did not start: $(tail -n 3 "$cluster_dir/log/munged.log" 2> /dev/null | tr '\n' ' ')"
    return 1
  fi
  local ctld_port slurmd_port
  if ! ctld_port=$(free_port) || ! slurmd_port=$(free_port); then
    cluster_why="no free TCP port"
    return 1
  fi
  # No cgroups, no accounting, no MPI: what a single-node test needs and every host has.
  cat > "$cluster_dir/slurm.conf" << CONF
ClusterName=tilemix-test
SlurmctldHost=$cluster_node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$cluster_dir/munge.socket
CredType=cred/munge
StateSaveLocation=$cluster_dir/state
SlurmdSpoolDir=$cluster_dir/spool
SlurmctldPidFile=$cluster_dir/slurmctld.pid
SlurmdPidFile=$cluster_dir/slurmd.pid
SlurmctldLogFile=$cluster_dir/log/slurmctld.log
SlurmdLogFile=$cluster_dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
DependencyParameters=kill_invalid_depend
MinJobAge=600
ReturnToService=2
NodeName=$cluster_node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=$cluster_partition Nodes=$cluster_node Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$cluster_dir/slurm.conf
  if ! slurmctld -f "$SLURM_CONF" || ! wait_for 20 scontrol ping > /dev/null; then
    cluster_why="slurmctld did not start: $(tail -n 3 "$cluster_dir/log/slurmctld.log" 2> /dev/null | tr '\n' ' ')"
    return 1
  fi
  if ! slurmd -f "$SLURM_CONF" -N "$cluster_node" || ! wait_for 30 node_idle; then
    cluster_why="slurmd did not start or its node is not idle ($(sinfo -h -n "$cluster_node" -o %t 2>&1)): $(
      tail -n 3 "$cluster_dir/log/slurmd.log" 2> /dev/null | tr '\n' ' ')"
    return 1
  fi
}

# Stops the daemon `$2` by the pid in its pid file (when that process is still `$2`): SIGTERM, then
# SIGKILL after 10 s.
stop_daemon() {
  local pid_file=$1 name=$2 pid
  [[ -s $pid_file ]] || return 0
  pid=$(cat "$pid_file")
  [[ $(cat "/proc/$pid/comm" 2> /dev/null) == "$name" ]] || return 0
  kill "$pid" 2> /dev/null || return 0
  wait_for 10 eval "! kill -0 $pid 2> /dev/null" || kill -9 "$pid" 2> /dev/null || true
}

stop_cluster() {
  [[ -n $cluster_dir ]] || return 0
  if [[ -s $cluster_dir/slurmctld.pid ]]; then
    local jobs
    jobs=$(squeue -h -o %A 2> /dev/null | sort -u | tr '\n' ' ')
    if [[ -n ${jobs// /} ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2> /dev/null || true
      wait_for 15 eval '[[ -z $(squeue -h 2> /dev/null) ]]' || true
    fi
  fi
  stop_daemon "$cluster_dir/slurmd.pid" slurmd
  stop_daemon "$cluster_dir/slurmctld.pid" slurmctld
  stop_daemon "$cluster_dir/munged.pid" munged
}

cluster_logs() {
  local log
  for log in "$cluster_dir"/log/*.log; do
    [[ -f $log ]] || continue
    echo "---- $log (end)"
    tail -n 20 "$log"
  done
}
