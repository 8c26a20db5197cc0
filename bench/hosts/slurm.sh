#!/usr/bin/env bash
# A Slurm cluster on the emulated hosts (hosts.sh): slurmctld and munged on host 0, one slurmd per
# host (node chorus-host<i>, address 10.77.0.<i+1>), each host in its own network, mount and UTS
# namespaces, so srun's tasks get the host's /dev/shm, address and host name. Every file the
# daemons use (slurm.conf, munge key and socket, state, spool, logs, pids) lies in one state dir,
# $CHORUS_HOSTS_STATE/<hosts tag>slurm (default /run/chorus-hosts/chorus-h<pid>-slurm); the
# machine's /etc/slurm and /etc/munge are never read or changed and no system service is started.
# One munged serves every host: its socket is a file, which every host's mount namespace sees.
#
#   slurm.sh up [--cpus N] [--wait S]   start the daemons on the hosts that are up (hosts.sh up or
#                                 inside hosts.sh run) and wait up to S s (default 60) until sinfo
#                                 shows every node idle; N CPUs per node (default 2, whatever the
#                                 machine has: SlurmdParameters=config_overrides). A failing `up`
#                                 stops what it started and prints the daemons' logs.
#   slurm.sh down                 stop the cluster: SIGTERM, after 5 s SIGKILL, to the daemons by
#                                 recorded pid and to every process started with this cluster's
#                                 SLURM_CONF (job steps, their tasks, srun), then remove the state
#                                 dir; safe after a failed `up` and for hosts already gone
#   slurm.sh exec HOST cmd...     run cmd on HOST (as hosts.sh exec) with SLURM_CONF set, e.g.
#                                 slurm.sh exec 0 srun -N 2 --ntasks-per-node 2 hostname
#   slurm.sh conf                 the path of the cluster's slurm.conf
#   slurm.sh status               the state dir, the daemons' pids, sinfo
#   slurm.sh check                exit 0 when slurmctld, slurmd, munged and srun are here and
#                                 hosts can be built, else say why (exit 77)
# Typical use: hosts.sh run 2 -- sh -c 'slurm.sh up && slurm.sh exec 0 srun -N 2 hostname;
# rc=$?; slurm.sh down; exit $rc'. The partition `emu` holds every node (Default=YES);
# select/linear gives whole nodes; KillWait is 5 s, so scancel ends a job's tasks within seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hosts_sh="$here/hosts.sh"
state_root="${CHORUS_HOSTS_STATE:-/run/chorus-hosts}"
ctld_port=6817
slurmd_port=6818

die() { echo "slurm.sh: $*" >&2; exit 1; }

missing_tools() {
  local t
  for t in slurmctld slurmd munged munge srun sbatch sinfo scancel; do
    command -v "$t" >/dev/null || { echo "no '$t' (Debian: slurm-wlm, munge)"; return; }
  done
}

# The hosts that are up: tag (first line of hosts.sh status), addresses and host names.
load_hosts() {
  tag="$("$hosts_sh" status 2>/dev/null | head -n 1)" || true
  [ -n "$tag" ] || die "no emulated hosts are up (run inside: hosts.sh run H -- ...)"
  IFS=, read -r -a addrs <<<"$("$hosts_sh" addrs)"
  IFS=, read -r -a names <<<"$("$hosts_sh" names 2>/dev/null)" || true
  if [ ${#names[@]} -ne ${#addrs[@]} ]; then  # a hosts.sh without `names`: host i is chorus-host<i>
    local i; names=()
    for i in "${!addrs[@]}"; do names+=("chorus-host$i"); done
  fi
  [ ${#addrs[@]} -ge 1 ] || die "hosts.sh addrs lists no hosts"
  sdir="$state_root/${tag}slurm"
  conf="$sdir/slurm.conf"
}

write_conf() {
  local cpus="$1" i
  mkdir -p "$sdir/ctld" "$sdir/munge" "$sdir/nodes"
  chmod 0755 "$sdir/munge"  # munged wants the socket dir searchable by all; the key stays 0400
  : >"$sdir/plugstack.conf"  # no SPANK plugins (else /etc/slurm/plugstack.conf is read)
  for i in "${!names[@]}"; do mkdir -p "$sdir/nodes/${names[$i]}/spool"; chmod 0755 "$sdir/nodes/${names[$i]}/spool"; done
  cat >"$conf" <<EOF
# Written by bench/hosts/slurm.sh for the emulated hosts $tag; removed by slurm.sh down.
ClusterName=chorus-emu
SlurmctldHost=${names[0]}(${addrs[0]})
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sdir/munge/munged.socket
StateSaveLocation=$sdir/ctld/state
SlurmctldLogFile=$sdir/ctld/slurmctld.log
SlurmctldPidFile=$sdir/ctld/slurmctld.pid
SlurmdSpoolDir=$sdir/nodes/%n/spool
SlurmdLogFile=$sdir/nodes/%n/slurmd.log
SlurmdPidFile=$sdir/nodes/%n/slurmd.pid
SlurmdParameters=config_overrides
PlugStackConfig=$sdir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/linear
SchedulerType=sched/backfill
PropagateResourceLimits=NONE
ReturnToService=2
KillWait=5
MessageTimeout=10
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=60
MailProg=/bin/true
SlurmctldDebug=info
SlurmdDebug=info
NodeName=DEFAULT CPUs=$cpus RealMemory=1000 State=UNKNOWN
EOF
  for i in "${!names[@]}"; do echo "NodeName=${names[$i]} NodeAddr=${addrs[$i]}" >>"$conf"; done
  echo "PartitionName=emu Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP" >>"$conf"
}

# Starts `cmd...` on host HOST in a session of its own, in the foreground of its own process
# (nsenter execs it), output to LOG; records "ROLE PID" in $sdir/pids.
start_daemon() {
  local role="$1" host="$2" log="$3"; shift 3
  SLURM_CONF="$conf" setsid "$hosts_sh" exec "$host" "$@" </dev/null >"$log" 2>&1 &
  echo "$role $!" >>"$sdir/pids"
}

# Runs `cmd...` on host 0 with this cluster's config, bounded.
on_head() { SLURM_CONF="$conf" timeout -k 2 15 "$hosts_sh" exec 0 "$@"; }

# Waits up to S seconds for `test_cmd` to succeed while every recorded daemon lives.
wait_until() {
  local what="$1" s="$2"; shift 2
  local deadline=$((SECONDS + s)) role pid
  until "$@" >/dev/null 2>&1; do
    while read -r role pid; do
      kill -0 "$pid" 2>/dev/null || fail_up "$role (pid $pid) exited while waiting for $what"
    done <"$sdir/pids"
    [ $SECONDS -lt $deadline ] || fail_up "no $what within $s s"
    sleep 0.5
  done
}

fail_up() {
  echo "slurm.sh: up failed: $*" >&2
  local f
  # Each daemon's stderr (under -D/--foreground it repeats the log), else its log.
  for f in "$sdir"/munge/munged.out "$sdir"/ctld/slurmctld.out "$sdir"/nodes/*/slurmd.out; do
    [ -s "$f" ] || f="${f%.out}.log"
    [ -s "$f" ] && { echo "---- ${f#"$sdir"/} (last lines) ----"; tail -n 15 "$f"; } >&2
  done
  exit 1
}

all_idle() {
  local states
  states="$(on_head sinfo -h -N -o '%N %t')" || return 1
  [ "$(grep -c ' idle$' <<<"$states")" -eq ${#names[@]} ]
}

cmd_up() {
  local cpus=2 wait_s=60
  while [ $# -gt 0 ]; do
    case "$1" in
      --cpus) cpus="${2:-}"; shift 2 || shift ;;
      --wait) wait_s="${2:-}"; shift 2 || shift ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ "$cpus" =~ ^[1-9][0-9]*$ ]] || die "up: --cpus must be a positive number, got '$cpus'"
  [[ "$wait_s" =~ ^[1-9][0-9]*$ ]] || die "up: --wait must be a positive number of seconds, got '$wait_s'"
  local why; why="$(missing_tools)"; [ -z "$why" ] || { echo "slurm.sh: cannot start Slurm: $why" >&2; exit 77; }
  load_hosts
  [ ! -e "$sdir" ] || die "$sdir exists: a cluster is up on $tag (slurm.sh down first)"
  trap 'echo "slurm.sh: up did not finish; stopping what it started" >&2; cmd_down' EXIT
  mkdir -p "$sdir"
  : >"$sdir/pids"
  write_conf "$cpus"
  # 1. munged with a key of its own (munged refuses a key others can read).
  dd if=/dev/urandom of="$sdir/munge/munge.key" bs=1 count=1024 status=none
  chmod 0400 "$sdir/munge/munge.key"
  start_daemon munged 0 "$sdir/munge/munged.out" munged --foreground --force \
    --socket="$sdir/munge/munged.socket" --key-file="$sdir/munge/munge.key" \
    --pid-file="$sdir/munge/munged.pid" --log-file="$sdir/munge/munged.log" --seed-file="$sdir/munge/munged.seed"
  wait_until "munge credential" 10 sh -c \
    'munge -n --socket="$0" | unmunge --socket="$0"' "$sdir/munge/munged.socket"
  # 2. slurmctld on host 0, then one slurmd per host.
  start_daemon slurmctld 0 "$sdir/ctld/slurmctld.out" slurmctld -D -c -f "$conf"
  wait_until "answer from slurmctld" 20 on_head scontrol ping
  local i
  for i in "${!names[@]}"; do
    start_daemon "slurmd:${names[$i]}" "$i" "$sdir/nodes/${names[$i]}/slurmd.out" slurmd -D -N "${names[$i]}" -f "$conf"
  done
  wait_until "idle state of all ${#names[@]} nodes in sinfo" "$wait_s" all_idle
  trap - EXIT
  echo "slurm.sh: ${#names[@]} nodes idle ($(IFS=,; echo "${names[*]}")), SLURM_CONF=$conf" >&2
}

# Processes started with state dir $1's SLURM_CONF in their environment: the daemons (start_daemon
# sets it), job steps and tasks (slurmd and srun pass it on), and srun or sbatch run by `exec`;
# never this script or its callers.
cluster_pids() {
  local d="$1" skip=" " p=$$ q
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do skip+="$p "; p="$(ps -o ppid= -p "$p" | tr -d ' ')"; done
  for q in $(env -u SLURM_CONF grep -lzxF "SLURM_CONF=$d/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
    q="${q#/proc/}"; q="${q%/environ}"
    [[ "$skip" == *" $q "* ]] || echo "$q"
  done
}

# Stops everything of the cluster in state dir $1 and removes it.
stop_cluster() {
  local d="$1" role pid pids=() left=()
  [[ "$d" == "$state_root"/chorus-h[0-9]*-slurm ]] || die "refusing to stop '$d': not a state dir slurm.sh makes"
  if [ -f "$d/pids" ]; then
    while read -r role pid; do
      # Only a recorded daemon still running with this state dir on its command line.
      if tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$d/"; then pids+=("$pid"); fi
    done <"$d/pids"
  fi
  mapfile -t -O ${#pids[@]} pids < <(cluster_pids "$d")
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    local signal deadline
    for signal in KILL none; do  # 5 s after SIGTERM, SIGKILL; 5 s after that, report
      deadline=$((SECONDS + 5))
      while mapfile -t left < <(cluster_pids "$d"); [ ${#left[@]} -gt 0 ] && [ $SECONDS -lt $deadline ]; do
        sleep 0.2
      done
      [ ${#left[@]} -gt 0 ] || break
      [ "$signal" = none ] || kill -"$signal" "${left[@]}" 2>/dev/null || true
    done
    [ ${#left[@]} -eq 0 ] || echo "slurm.sh: processes of $d still alive after SIGKILL: ${left[*]}" >&2
  fi
  rm -rf "${d:?}"
}

# Every cluster under $state_root: the one on the hosts that are up, and any left by hosts already
# gone (only one harness is up at a time).
cmd_down() {
  local d
  for d in "$state_root"/chorus-h[0-9]*-slurm; do
    [ -d "$d" ] && stop_cluster "$d"
  done
  return 0
}

cmd_exec() {
  [ $# -ge 2 ] || die "usage: slurm.sh exec HOST cmd..."
  load_hosts
  [ -f "$conf" ] || die "no cluster is up on $tag (slurm.sh up)"
  SLURM_CONF="$conf" exec "$hosts_sh" exec "$@"
}

what="${1:-}"; shift || true
case "$what" in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  exec) cmd_exec "$@" ;;
  conf) load_hosts; [ -f "$conf" ] || die "no cluster is up on $tag"; echo "$conf" ;;
  status)
    load_hosts; [ -f "$conf" ] || die "no cluster is up on $tag"
    echo "$sdir"; cat "$sdir/pids"; on_head sinfo -N -l ;;
  check)
    why="$(missing_tools)"; [ -z "$why" ] || { echo "cannot run Slurm: $why"; exit 77; }
    "$hosts_sh" check ;;
  *) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
