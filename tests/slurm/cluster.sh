#!/usr/bin/env bash
# A throw-away single-node Slurm cluster for tests (deploy/slurm/README.md gives the reasons for its settings).
#
#   cluster.sh start DIR   start munged, slurmctld and slurmd, all state in DIR
#   cluster.sh stop DIR    cancel every job, stop the daemons, check nothing is left
#
# DIR must not exist yet (start) and holds everything: slurm.conf, a private munge
# key and socket, state, spool, logs and pid files. After start, `. DIR/env`
# sets SLURM_CONF for the client commands (sbatch, squeue, scancel, ...).
# The cluster uses its own munge socket and its own ports (free ones are picked
# unless SLURMCTLD_PORT / SLURMD_PORT are set), so it neither needs nor disturbs
# a munged or a Slurm already on the machine. Exit status: 0 on success,
# 1 on failure (with the reason and the relevant log lines on stderr),
# 3 from start when the Slurm or munge programs are not installed.
set -euo pipefail

# This script and its subshells must not carry SLURM_CONF in their environment:
# a process that does is taken for a leftover of the cluster by `stop` (see
# strays), and /proc/PID/environ shows the environment a process was started with.
if [ -n "${SLURM_CONF+set}" ]; then exec env -u SLURM_CONF bash "$0" "$@"; fi

# The daemons live in /usr/sbin, which a non-login PATH may leave out.
PATH=$PATH:/usr/sbin:/sbin

die() { echo "cluster.sh: $*" >&2; exit 1; }

# The listening TCP ports, one per line (from /proc, so no iproute2 is needed).
listening_ports() {
  local f hex
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    for hex in $(awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' "$f"); do
      echo $((16#$hex))
    done
  done
}

port_free() { ! listening_ports | grep -qx "$1"; }

pick_port() {
  local p
  for ((p = $1; p < $1 + 500; p++)); do
    if port_free "$p" && [ "$p" != "${2:-}" ]; then echo "$p"; return; fi
  done
  die "no free port in $1..$(($1 + 499))"
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Waits up to $2 tenths of a second for pid $1 to exit; 0 if it did.
wait_exit() {
  local i
  for ((i = 0; i < $2; i++)); do
    pid_alive "$1" || return 0
    sleep 0.1
  done
  ! pid_alive "$1"
}

# Stops the daemon whose pid is in file $1: SIGTERM, then SIGKILL after 10 s.
stop_pidfile() {
  local pid
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_exit "$pid" 100 || { kill -KILL "$pid" 2>/dev/null || true; wait_exit "$pid" 50 || true; }
  fi
  rm -f "$1"
}

# The pids of processes started for this cluster (their environment carries
# this cluster's SLURM_CONF): slurmstepd and job processes left behind.
strays() {
  local conf="SLURM_CONF=$1/slurm.conf" p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    if tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -qxF "$conf"; then
      echo "${p#/proc/}"
    fi
  done
}

start() {
  local dir=$1
  for prog in munged mungekey munge unmunge slurmctld slurmd sinfo; do
    command -v "$prog" >/dev/null || { echo "cluster.sh: $prog is not installed" >&2; exit 3; }
  done
  [ -e "$dir" ] && die "$dir exists already; start wants a new directory"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # The spool directory is unusable under a 0700 parent (mktemp -d's mode).
  chmod 0755 "$dir"
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  local host ctld_port slurmd_port cpus mem
  host=$(hostname -s)
  ctld_port=${SLURMCTLD_PORT:-$(pick_port 16817)}
  slurmd_port=${SLURMD_PORT:-$(pick_port $((ctld_port + 1)) "$ctld_port")}
  port_free "$ctld_port" || die "port $ctld_port (SlurmctldPort) is in use"
  port_free "$slurmd_port" || die "port $slurmd_port (SlurmdPort) is in use"
  local hw
  hw=$(slurmd -C | head -n1)
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  [ -n "$cpus" ] && [ -n "$mem" ] || die "cannot read CPUs and RealMemory from slurmd -C: $hw"
  mem=$((mem * 9 / 10))

  # A private munged: its own key, socket, pid, log and seed files.
  install -d -o munge -g munge -m 0755 "$dir/munge"
  mungekey -c -k "$dir/munge/munge.key" >/dev/null 2>&1 || die "mungekey -c failed"
  chown munge:munge "$dir/munge/munge.key"
  chmod 0400 "$dir/munge/munge.key"
  local sock="$dir/munge/munge.socket"
  runuser -u munge -- munged --socket="$sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" \
    || die "munged did not start: $(tail -n 5 "$dir/munge/munged.log" 2>/dev/null)"
  munge -n -S "$sock" | unmunge -S "$sock" >/dev/null || die "munge -n | unmunge fails on $sock"

  cat > "$dir/slurm.conf" <<CONF
ClusterName=single
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=300
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf" > "$dir/env"

  SLURM_CONF="$dir/slurm.conf" slurmctld || die "slurmctld did not start: $(tail -n 20 "$dir/log/slurmctld.log" 2>/dev/null)"
  SLURM_CONF="$dir/slurm.conf" slurmd || die "slurmd did not start: $(tail -n 20 "$dir/log/slurmd.log" 2>/dev/null)"
  local i state=""
  for ((i = 0; i < 300; i++)); do
    state=$(SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.1
  done
  if [ "$state" != idle ]; then
    echo "cluster.sh: node not idle after 30 s (state: '${state:-none}')" >&2
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    stop "$dir" >/dev/null 2>&1 || true
    exit 1
  fi
  echo "cluster.sh: up in $dir (node $host, $cpus CPUs, ports $ctld_port/$slurmd_port)"
}

stop() {
  local dir
  [ -d "$1" ] || die "$1 is not a directory"
  dir=$(cd "$1" && pwd)
  [ -f "$dir/slurm.conf" ] || die "$dir has no slurm.conf"
  local conf="$dir/slurm.conf" ctld_port slurmd_port
  ctld_port=$(sed -n 's/^SlurmctldPort=//p' "$dir/slurm.conf")
  slurmd_port=$(sed -n 's/^SlurmdPort=//p' "$dir/slurm.conf")
  # Killing the daemons does not kill running jobs (slurmstepd ignores SIGTERM):
  # cancel every job and wait for the queue to empty first.
  if [ -s "$dir/slurmctld.pid" ] && pid_alive "$(cat "$dir/slurmctld.pid")"; then
    local jobs i
    jobs=$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086 # one job id per word
      SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
    fi
    for ((i = 0; i < 300; i++)); do
      [ -z "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  # Anything still running from this cluster (a step the cancel did not reach).
  local p left=""
  for p in $(strays "$dir"); do
    kill -KILL "$p" 2>/dev/null || true
    left="$left $p"
  done
  [ -n "$left" ] && echo "cluster.sh: killed leftover processes:$left" >&2
  if [ -S "$dir/munge/munge.socket" ] || [ -s "$dir/munge/munged.pid" ]; then
    stop_pidfile "$dir/munge/munged.pid"
  fi
  local i
  for ((i = 0; i < 100; i++)); do
    port_free "$ctld_port" && port_free "$slurmd_port" && break
    sleep 0.1
  done
  port_free "$ctld_port" || die "port $ctld_port still in use after stop"
  port_free "$slurmd_port" || die "port $slurmd_port still in use after stop"
  [ -z "$(strays "$dir")" ] || die "processes of this cluster survive: $(strays "$dir" | tr '\n' ' ')"
  echo "cluster.sh: stopped $dir"
}

case "${1:-}" in
  start) [ $# -eq 2 ] || die "usage: cluster.sh start DIR"; start "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
  *) die "usage: cluster.sh start|stop DIR" ;;
esac
