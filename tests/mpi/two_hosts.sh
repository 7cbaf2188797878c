#!/bin/sh
# Two "hosts" on this machine for the MPI tests: each is a long-lived holder process with its own
# network, UTS (hostname) and mount namespaces, a veth link between the two, an /etc/hosts that
# names both, and a private /dev/shm (so shared memory can only be shared inside a host, as on two
# real machines). Needs root, iproute2 and util-linux (unshare, nsenter).
#
#   two_hosts.sh up DIR OWNER_PID     make hosts alpha (10.77.0.1) and beta (10.77.0.2) on interface
#                                     mpi0; write DIR/hostfile and DIR/agent (a launch agent for
#                                     mpirun's plm_rsh_agent, used in place of ssh). Once OWNER_PID
#                                     has exited, the holders do `down` by themselves within a second
#                                     (a killed test leaves nothing running).
#   two_hosts.sh run DIR HOST CMD...  run CMD inside HOST (exec: the command keeps this pid)
#   two_hosts.sh kill DIR HOST        SIGKILL every process inside HOST but its holder (a crash)
#   two_hosts.sh down DIR             end every process inside both hosts, and the hosts
#
# Every failure prints what is missing and exits non-zero: the tests that use this fail, never skip.
# shellcheck disable=SC2086  # (lists of pids are split into words on purpose)
set -eu

HOSTS="alpha beta"
IFACE=mpi0

die() {
  echo "two_hosts.sh: $*" >&2
  exit 1
}

addr_of() {
  case "$1" in
    alpha) echo 10.77.0.1 ;;
    beta) echo 10.77.0.2 ;;
    *) die "unknown host '$1'; expected alpha or beta" ;;
  esac
}

# The holder of HOST, checked alive.
holder() {
  [ -f "$DIR/$1.pid" ] || die "no host '$1' in $DIR; expected 'two_hosts.sh up $DIR' first"
  pid=$(cat "$DIR/$1.pid")
  [ -d "/proc/$pid" ] || die "host '$1' is gone (holder $pid exited)"
  echo "$pid"
}

# Every process but the holder whose network namespace is the holder's (one find: fast enough
# that a killed host stops at once).
members() {
  ns=$(readlink "/proc/$1/ns/net" | sed 's/[][]/\\&/g') || return 0
  find /proc/[0-9]*/ns/net -maxdepth 0 -lname "$ns" 2>/dev/null | cut -d/ -f3 | grep -vx "$1" || true
}

up() {
  OWNER=$1
  [ "$(id -u)" -eq 0 ] || die "needs root to make network namespaces; got uid $(id -u) (CI runs as root)"
  for tool in ip unshare nsenter mount hostname; do
    command -v "$tool" >/dev/null || die "needs '$tool' (iproute2, util-linux, mount: scripts/setup)"
  done
  mkdir -p "$DIR"
  {
    echo "127.0.0.1 localhost"
    for h in $HOSTS; do echo "$(addr_of "$h") $h"; done
  } >"$DIR/etc-hosts"
  for h in $HOSTS; do
    # The holder: new namespaces, then it waits for its owner. Its mounts are private to it.
    unshare --net --uts --mount --propagation private -- /bin/sh -c "
      hostname $h && mount --bind '$DIR/etc-hosts' /etc/hosts &&
      mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm && ip link set lo up || exit 1
      touch '$DIR/$h.ready'
      while kill -0 $OWNER 2>/dev/null; do sleep 1; done
      exec '$SELF' down '$DIR'" </dev/null >"$DIR/$h.log" 2>&1 &
    echo $! >"$DIR/$h.pid"
  done
  for h in $HOSTS; do
    n=0
    until [ -f "$DIR/$h.ready" ]; do
      [ -d "/proc/$(cat "$DIR/$h.pid")" ] || die "could not make host $h: $(cat "$DIR/$h.log")"
      # A bound only against a hang (a loaded machine takes well under a second).
      n=$((n + 1))
      [ $n -lt 3000 ] || die "host $h was not ready after 5 minutes"
      sleep 0.1
    done
  done
  a=$(holder alpha)
  b=$(holder beta)
  ip link add name $IFACE netns "$a" type veth peer name $IFACE netns "$b" ||
    die "could not make the veth link between the hosts (kernel without veth?)"
  for h in $HOSTS; do
    p=$(holder "$h")
    nsenter -t "$p" -n ip addr add "$(addr_of "$h")/24" dev $IFACE
    nsenter -t "$p" -n ip link set $IFACE up
  done
  for h in $HOSTS; do echo "$h slots=2"; done >"$DIR/hostfile"
  # mpirun calls the agent as `agent HOST COMMAND...`, as it would call ssh.
  cat >"$DIR/agent" <<EOF
#!/bin/sh
host=\$1
shift
exec '$SELF' run '$DIR' "\$host" /bin/sh -c "\$*"
EOF
  chmod +x "$DIR/agent"
}

[ $# -ge 2 ] || die "usage: two_hosts.sh up|run|kill|down DIR ..."
SELF=$(readlink -f "$0")
CMD=$1
DIR=$2
shift 2
case "$CMD" in
  up)
    [ $# -eq 1 ] || die "usage: two_hosts.sh up DIR OWNER_PID"
    up "$1"
    ;;
  run)
    [ $# -ge 2 ] || die "usage: two_hosts.sh run DIR HOST CMD..."
    h=$1
    shift
    # A name or an address of a host: mpirun passes what the hostfile says.
    for known in $HOSTS; do [ "$h" = "$(addr_of "$known")" ] && h=$known; done
    p=$(holder "$h")
    exec nsenter -t "$p" -n -u -m -- "$@"
    ;;
  kill)
    [ $# -eq 1 ] || die "usage: two_hosts.sh kill DIR HOST"
    p=$(holder "$1")
    victims=$(members "$p")
    [ -n "$victims" ] || die "nothing runs inside host $1"
    kill -KILL $victims 2>/dev/null || true
    ;;
  down)
    # Everything inside both hosts first, then the holders (this may be one of them).
    holders=""
    for h in $HOSTS; do
      [ -f "$DIR/$h.pid" ] || continue
      p=$(cat "$DIR/$h.pid")
      [ -d "/proc/$p" ] || continue
      victims=$(members "$p")
      [ -z "$victims" ] || kill -KILL $victims 2>/dev/null || true
      holders="$holders $p"
    done
    [ -z "$holders" ] || kill -KILL $holders 2>/dev/null || true
    ;;
  *) die "unknown command '$CMD'; expected up, run, kill or down" ;;
esac
