#!/usr/bin/env bash
# A single-node SLURM cluster on this machine: the SLURM tests' cluster in CI (tests/sweep/test_slurm.py, run by
# .ci/run) and a way to try `antlm-bench sweep --executor slurm` without a cluster (docs/sweep.md, "SLURM on one
# machine").
#
#   ci/slurm/cluster.sh up        install slurm-wlm and munge when missing, start munged (unless one answers),
#                                 slurmctld and slurmd, wait until partition `debug` has an idle node
#   ci/slurm/cluster.sh env       the line to eval in a shell that submits: export SLURM_CONF=...
#   ci/slurm/cluster.sh status    which daemons of ours run, and sinfo; exit status 0 when the cluster is up
#   ci/slurm/cluster.sh down      cancel the cluster's jobs and stop the daemons `up` started (nothing else)
#
# As root, without systemd (the daemons are started by hand), from Debian's packages: slurmctld and slurmd on this
# host, one node with this machine's CPUs and memory (`slurmd -C`), ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none, select/cons_tres by CPU (tasks of one CPU each run side by side), no accounting (sacct has
# nothing to read: the sweep polls squeue, antlm_bench/sweep/executors.py). Everything of ours lives in
# $ANTLM_SLURM_DIR (default /var/lib/antlm-bench-slurm): slurm.conf, the controller's state, pid files, logs; the
# machine's own /etc/slurm is not touched (clients find ours through SLURM_CONF). `up` is idempotent: what runs
# is left running; a daemon of ours that died is started again, on a fresh job state.
set -euo pipefail

DIR="${ANTLM_SLURM_DIR:-/var/lib/antlm-bench-slurm}"
CONF="$DIR/slurm.conf"
PARTITION=debug
READY_S="${ANTLM_SLURM_READY_S:-90}"
export SLURM_CONF="$CONF"

say() { echo "cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "run as root: it installs packages and starts munged, slurmctld and slurmd"
}

# a pid file of ours names a live process of the expected program
alive() {  # alive PIDFILE PROGRAM
  local pid
  [ -f "$1" ] || return 1
  pid="$(cat "$1" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = "$2" ]
}

stop_pid() {  # stop_pid PIDFILE PROGRAM: SIGTERM, then SIGKILL after 20 s
  local pid i
  alive "$1" "$2" || { rm -f "$1"; return 0; }
  pid="$(cat "$1")"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 40); do
    alive "$1" "$2" || break
    sleep 0.5
  done
  if alive "$1" "$2"; then
    say "$2 (pid $pid) ignored SIGTERM for 20 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
  say "stopped $2 (pid $pid)"
}

install_packages() {
  local missing=0 cmd
  for cmd in slurmctld slurmd sbatch squeue munged munge; do
    command -v "$cmd" >/dev/null 2>&1 || missing=1
  done
  [ "$missing" -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "slurm-wlm and munge are missing and there is no apt-get to install them"
  say "installing slurm-wlm and munge (Debian's packages)"
  # no service may start from the package scripts: we start the daemons ourselves, with our configuration
  local policy=/usr/sbin/policy-rc.d planted=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && planted=1
  fi
  local status=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge >/dev/null; } || status=$?
  [ "$planted" -eq 1 ] && rm -f "$policy"
  [ "$status" -eq 0 ] || die "apt-get install slurm-wlm munge failed (exit status $status)"
}

munge_answers() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_answers; then
    return 0  # the machine's munged (or ours from an earlier `up`): used as it is
  fi
  local key=/etc/munge/munge.key
  if [ ! -s "$key" ]; then
    say "creating $key"
    mungekey --create --keyfile="$key" 2>/dev/null || dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
  fi
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  chown munge:munge "$key" && chmod 0400 "$key"
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid \
    || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$DIR/run/munged.pid"  # ours: `down` stops it
  local i
  for i in $(seq 1 20); do munge_answers && break; sleep 0.5; done
  munge_answers || die "munged started but does not answer (see /var/log/munge/munged.log)"
  say "started munged (pid $(cat "$DIR/run/munged.pid"))"
}

write_conf() {
  local host node
  host="$(hostname -s)"
  # this machine as slurmd sees it (CPUs, sockets, cores, memory): a node whose slurm.conf line differs from what
  # slurmd detects is drained
  node="$(slurmd -C | head -n 1)"
  [[ "$node" == NodeName=* ]] || die "slurmd -C printed no node line: $node"
  cat >"$CONF.tmp" <<EOF
# written by ci/slurm/cluster.sh: one node, partition $PARTITION, no accounting
ClusterName=antlm-bench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=30
MinJobAge=300
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv -f "$CONF.tmp" "$CONF"
}

node_state() { sinfo -h -p "$PARTITION" -o %t 2>/dev/null | head -n 1; }

ready() { case "$(node_state)" in idle|mix|alloc) return 0 ;; *) return 1 ;; esac; }

log_tail() { tail -n 15 "$DIR/log/$1.log" 2>/dev/null | sed "s/^/  $1.log: /" >&2 || true; }

up() {
  need_root
  install_packages
  [ -L "$DIR" ] && die "$DIR is a symbolic link; remove it or set ANTLM_SLURM_DIR to a folder of your own"
  install -d -m 0755 "$DIR"
  [ "$(stat -c %u "$DIR")" = 0 ] || die "$DIR is not owned by root; remove it or set ANTLM_SLURM_DIR"
  local sub
  for sub in state spool run log; do
    [ -L "$DIR/$sub" ] && die "$DIR/$sub is a symbolic link; remove it"
    install -d -m 0755 "$DIR/$sub"
  done
  start_munge
  if alive "$DIR/run/slurmctld.pid" slurmctld && alive "$DIR/run/slurmd.pid" slurmd && ready; then
    say "already up: partition $PARTITION of $CONF"
    return 0
  fi
  if ! alive "$DIR/run/slurmctld.pid" slurmctld; then
    write_conf
    # -c: a fresh job state (no job of an earlier cluster comes back)
    slurmctld -f "$CONF" -c || { log_tail slurmctld; die "slurmctld did not start"; }
    say "started slurmctld"
  fi
  if ! alive "$DIR/run/slurmd.pid" slurmd; then
    slurmd -f "$CONF" || { log_tail slurmd; die "slurmd did not start"; }
    say "started slurmd"
  fi
  local waited=0
  until ready; do
    if [ "$waited" -ge "$((READY_S * 2))" ]; then
      sinfo -p "$PARTITION" >&2 || true
      log_tail slurmctld
      log_tail slurmd
      die "partition $PARTITION has no idle node after ${READY_S} s"
    fi
    # a node left down by an earlier cluster on this folder is resumed
    if [ "$(node_state)" = down ]; then
      scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  say "up: partition $PARTITION, node $(sinfo -h -p "$PARTITION" -o '%N, %c CPUs, %m MB'); in your shell: export SLURM_CONF=$CONF"
}

down() {
  need_root
  if alive "$DIR/run/slurmctld.pid" slurmctld; then
    # the cluster is ours: every job on it is cancelled, and the daemons wait until their job steps are gone
    local jobs i
    jobs="$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')"
    if [ -n "${jobs// /}" ]; then
      say "cancelling job(s) $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for i in $(seq 1 90); do  # KillWait (30 s) and a margin
        [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.5
      done
    fi
  fi
  stop_pid "$DIR/run/slurmd.pid" slurmd
  stop_pid "$DIR/run/slurmctld.pid" slurmctld
  stop_pid "$DIR/run/munged.pid" munged
  say "down (logs kept in $DIR/log)"
}

status() {
  local up=0 name
  for name in munged slurmctld slurmd; do
    if alive "$DIR/run/$name.pid" "$name"; then
      echo "$name: running (pid $(cat "$DIR/run/$name.pid"), started by cluster.sh)"
    elif [ "$name" = munged ] && munge_answers; then
      echo "munged: answering (not started by cluster.sh)"
    else
      echo "$name: not running"
      [ "$name" = munged ] || up=1
    fi
  done
  if [ "$up" -eq 0 ] && ready; then
    sinfo -p "$PARTITION"
    echo "up: export SLURM_CONF=$CONF"
    return 0
  fi
  echo "down"
  return 1
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 up|down|status|env (a single-node SLURM cluster for the SLURM tests; see the header)" >&2
     exit 2 ;;
esac
