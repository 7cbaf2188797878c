#!/bin/sh
# A one-node Slurm cluster on this machine for the Slurm test (slurm_test): munged with its own
# key and socket, slurmctld and slurmd (Debian's munge, slurmctld, slurmd: scripts/setup), all
# configured by a slurm.conf in DIR, their state, spool, logs and pid files in DIR, their ports
# picked among the free ones, no cgroups (proctrack/linuxproc, task/none). Needs root (CI has it):
# SlurmUser and SlurmdUser are root, as the test's job steps are.
#
#   one_node_slurm.sh up DIR OWNER_PID  write DIR/slurm.conf, start the three daemons and wait for
#                                       the node to be idle (polling sinfo). Once OWNER_PID has
#                                       exited, a watcher does `down` by itself within a second
#                                       (a killed test leaves nothing running). Prints the node's
#                                       name; run srun, salloc and sinfo with SLURM_CONF=DIR/slurm.conf.
#   one_node_slurm.sh down DIR          end every process started for DIR: the daemons, the job
#                                       steps' slurmstepd and tasks, srun and salloc
#
# Every process started for DIR carries NNFLEET_SLURM_DIR=DIR in its environment (the daemons get
# it here; slurmstepd inherits slurmd's; srun passes the caller's to the tasks), which is how
# `down` finds them all. Every failure prints what is missing and exits non-zero: the test that
# uses this fails, never skips.
# shellcheck disable=SC2086  # (lists of pids are split into words on purpose)
set -eu

die() {
  echo "one_node_slurm.sh: $*" >&2
  exit 1
}

# Every process but this one (and its watcher) started for DIR: those whose environment names DIR
# (one grep over every process's NUL-separated environment; processes gone meanwhile are passed
# over) and the job steps' slurmstepd, which clear their environment but hold their sockets in
# DIR/spool (their inodes in /proc/net/unix, among the open files of every slurmstepd).
members() {
  {
    grep -lzxF "NNFLEET_SLURM_DIR=$DIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
    inodes=$(awk -v d="$DIR/spool/" 'index($8, d) == 1 { print $7 }' /proc/net/unix)
    if [ -n "$inodes" ]; then
      for p in $(grep -lx slurmstepd /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3); do
        fds=$(ls -l "/proc/$p/fd" 2>/dev/null) || continue
        for i in $inodes; do
          case "$fds" in *"socket:[$i]"*) echo "$p" ;; esac
        done
      done
    fi
  } | sort -u | grep -vx -e $$ -e "${WATCHER:-$$}" || true
}

# A TCP port nothing listens on (/proc/net/tcp*: state 0A is LISTEN), among 20000-29999, not $1.
free_port() {
  listening=$(awk '$4 == "0A" { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  n=0
  while :; do
    p=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 10000))
    hex=$(printf '%04X' "$p")
    if [ "$p" != "${1:-}" ] && ! echo "$listening" | grep -qx "$hex"; then
      echo "$p"
      return
    fi
    n=$((n + 1))
    [ $n -lt 1000 ] || die "no free TCP port among 20000-29999"
  done
}

write_conf() {
  ctl_port=$(free_port)
  d_port=$(free_port "$ctl_port")
  # Slurm schedules by the CPUs configured here (config_overrides): at least 2, the test's ranks.
  cpus=$(nproc)
  [ "$cpus" -ge 2 ] || cpus=2
  cat >"$DIR/slurm.conf" <<EOF
ClusterName=nnfleet
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=nnfleet Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

# Starts daemon NAME (its command after it) in the background with DIR's environment.
start_daemon() {
  name=$1
  shift
  env NNFLEET_SLURM_DIR="$DIR" SLURM_CONF="$DIR/slurm.conf" "$@" </dev/null >"$DIR/$name.out" 2>&1 &
  echo $! >"$DIR/$name.daemon"
}

# Fails with the daemon's log when it has exited.
check_alive() {
  [ -d "/proc/$(cat "$DIR/$1.daemon")" ] ||
    die "$1 exited: $(cat "$DIR/$1.out" "$DIR/$1.log" 2>/dev/null | tail -20)"
}

up() {
  OWNER=$1
  [ "$(id -u)" -eq 0 ] || die "needs root to run slurmd and slurmctld as SlurmUser root; got uid $(id -u) (CI runs as root)"
  for tool in munged slurmctld slurmd srun sinfo; do
    command -v "$tool" >/dev/null ||
      die "needs '$tool' (Debian's munge, slurmctld, slurmd, slurm-client: scripts/setup)"
  done
  NODE=$(hostname -s)
  mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool"
  chmod 700 "$DIR/munge"
  # munged refuses a key others may read; 1 KiB of random bytes is a valid key.
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 600 "$DIR/munge/munge.key"
  write_conf
  start_daemon munged munged --foreground --force --key-file="$DIR/munge/munge.key" \
    --socket="$DIR/munge/munge.socket" --pid-file="$DIR/munge/munged.pid" \
    --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
  # The watcher: once the owner has gone, everything goes.
  (
    while kill -0 "$OWNER" 2>/dev/null; do sleep 1; done
    exec "$SELF" down "$DIR"
  ) </dev/null >"$DIR/watcher.log" 2>&1 &
  echo $! >"$DIR/watcher.pid"
  wait_for "munged's socket" munge_ready munged
  start_daemon slurmctld slurmctld -D -i -f "$DIR/slurm.conf"
  start_daemon slurmd slurmd -D -N "$NODE" -f "$DIR/slurm.conf"
  wait_for "node $NODE idle" node_idle slurmctld slurmd
  echo "$NODE"
}

node_idle() {
  state=$(env SLURM_CONF="$DIR/slurm.conf" sinfo -h -n "$NODE" -o %T 2>/dev/null) || return 1
  [ "$state" = idle ]
}

munge_ready() { test -S "$DIR/munge/munge.socket"; }

# Polls CHECK (a function) until it holds; the DAEMONS after it must stay alive meanwhile. The
# bound only keeps a hang from lasting forever (a loaded machine takes a few seconds).
wait_for() {
  what=$1
  check=$2
  shift 2
  n=0
  until "$check"; do
    for d in "$@"; do check_alive "$d"; done
    n=$((n + 1))
    [ $n -lt 3000 ] || die "$what: not after 5 minutes; slurmctld.log: $(tail -5 "$DIR/slurmctld.log" 2>/dev/null)"
    sleep 0.1
  done
}

down() {
  WATCHER=$(cat "$DIR/watcher.pid" 2>/dev/null || true)
  # TERM first (slurmd ends its steps, the daemons save state), then KILL what is left.
  victims=$(members)
  [ -z "$victims" ] || kill -TERM $victims 2>/dev/null || true
  n=0
  while [ -n "$(members)" ] && [ $n -lt 30 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  victims=$(members)
  [ -z "$victims" ] || kill -KILL $victims 2>/dev/null || true
  if [ -n "$WATCHER" ] && [ "$WATCHER" != $$ ] && [ -d "/proc/$WATCHER" ]; then
    kill -KILL "$WATCHER" 2>/dev/null || true
  fi
}

[ $# -ge 2 ] || die "usage: one_node_slurm.sh up|down DIR ..."
SELF=$(readlink -f "$0")
CMD=$1
DIR=$(readlink -f "$2")
shift 2
case "$CMD" in
  up)
    [ $# -eq 1 ] || die "usage: one_node_slurm.sh up DIR OWNER_PID"
    up "$1"
    ;;
  down) down ;;
  *) die "unknown command '$CMD'; expected up or down" ;;
esac
