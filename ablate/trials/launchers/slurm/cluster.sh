#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for ablate's tests, CI, and trying launcher=slurm.
#
#   bash ablate/trials/launchers/slurm/cluster.sh start [--fresh]    install what is missing, write the config,
#                                                             start the daemons, wait until the node is idle
#   bash ablate/trials/launchers/slurm/cluster.sh stop [--keep-jobs] cancel every job (unless --keep-jobs), then stop
#                                                             the daemons this script started, by recorded PID
#   bash ablate/trials/launchers/slurm/cluster.sh restart            stop --keep-jobs, then start (applies new knobs)
#   bash ablate/trials/launchers/slurm/cluster.sh status             daemons, node state and queue
#
# `start --fresh` also cancels every job and wipes the cluster's state (job ids restart at 1, sacct forgets).
# Needs root, Debian 12 (bookworm: Slurm 22.05, munge, MariaDB 10.11 from apt) and no systemd: the daemons
# are started by hand and never keep the caller's stdin/stdout open, so `start | cat` returns.
#
# Knobs (environment variables):
#   SLURM_LOCAL_ACCOUNTING=1   1: MariaDB + slurmdbd so `sacct` works (without it submitit cannot see a job
#                              that died without a result); 0: accounting_storage/none, fewer packages
#   SLURM_LOCAL_GPUS=2         fake GPUs (character devices, GRES gpu) so GPU requests schedule; 0: none
#   SLURM_LOCAL_CPUS=          declare this many CPUs instead of the real count (oversubscribes; scheduling
#                              tests only; refused together with SLURM_LOCAL_CGROUP=1)
#   SLURM_LOCAL_CGROUP=0       1: proctrack/task cgroup (v1), so --mem is enforced (OOM kills)
#   SLURM_LOCAL_DIR=/var/lib/slurm-local   state, spool, logs, pid files, database, fake device nodes
#   SLURM_LOCAL_WAIT_S=60      how long `start` waits for each daemon and for the node
#   SLURM_LOCAL_DB_PORT=6820   MariaDB port (bound to 127.0.0.1 only)
#
# Config goes to /etc/slurm (slurm.conf, gres.conf, slurmdbd.conf, cgroup.conf), so sbatch, squeue, sacct
# and submitit need no SLURM_CONF. Node `localhost`, partition `debug` (the default). Logs: $SLURM_LOCAL_DIR/log.
# Measured facts behind every setting here: shared/slurm-notes.md.
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/var/lib/slurm-local}
ACCOUNTING=${SLURM_LOCAL_ACCOUNTING:-1}
GPUS=${SLURM_LOCAL_GPUS:-2}
CPUS=${SLURM_LOCAL_CPUS:-}
CGROUP=${SLURM_LOCAL_CGROUP:-0}
WAIT_S=${SLURM_LOCAL_WAIT_S:-60}
DB_PORT=${SLURM_LOCAL_DB_PORT:-6820}
CONF_DIR=/etc/slurm
MARK="# written by ablate/trials/launchers/slurm/cluster.sh"
OWNED="$DIR/.slurm_cluster"   # marks $DIR as ours, so --fresh never wipes a directory it did not create
T0=$(date +%s.%N)

log() { printf 'slurm_cluster: %s\n' "$*"; }
die() { printf 'slurm_cluster: error: %s\n' "$*" >&2; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

check_knobs() {
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"
  case "$ACCOUNTING" in 0|1) ;; *) die "SLURM_LOCAL_ACCOUNTING must be 0 or 1, got '$ACCOUNTING'" ;; esac
  case "$CGROUP" in 0|1) ;; *) die "SLURM_LOCAL_CGROUP must be 0 or 1, got '$CGROUP'" ;; esac
  [[ "$GPUS" =~ ^[0-9]+$ ]] || die "SLURM_LOCAL_GPUS must be a count, got '$GPUS'"
  [[ -z "$CPUS" || "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "SLURM_LOCAL_CPUS must be a positive count, got '$CPUS'"
  [[ "$WAIT_S" =~ ^[1-9][0-9]*$ ]] || die "SLURM_LOCAL_WAIT_S must be seconds, got '$WAIT_S'"
  [[ "$DB_PORT" =~ ^[1-9][0-9]*$ ]] || die "SLURM_LOCAL_DB_PORT must be a port, got '$DB_PORT'"
  if [ -n "$CPUS" ] && [ "$CGROUP" = 1 ]; then
    die "SLURM_LOCAL_CPUS with SLURM_LOCAL_CGROUP=1 would bind tasks to cores that do not exist; unset one"
  fi
  case "$DIR" in
    /*/*) ;;
    *) die "SLURM_LOCAL_DIR must be an absolute path at least two levels deep, got '$DIR'" ;;
  esac
}

# -- processes ------------------------------------------------------------------------------------
# pid_of NAME: the PID recorded in $DIR/run/NAME.pid when that process is alive and really is NAME.
pid_of() {
  local f="$DIR/run/$1.pid" pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  echo "$pid"
}

# wait_until SECONDS WHAT COMMAND...: poll COMMAND every 0.1 s until it succeeds.
wait_until() {
  local limit=$1 what=$2; shift 2
  local end=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.1
  done
  log "$what ($(elapsed) s)"
}

# -- install --------------------------------------------------------------------------------------
install_packages() {
  local want=(slurmctld slurmd slurm-client munge) missing=() p
  [ "$ACCOUNTING" = 1 ] && want+=(slurmdbd mariadb-server-core mariadb-client-core)
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  # Keep the packages' init scripts from starting daemons (munged, or slurmctld on a reinstall).
  local own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  local rc=0
  {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  } >"/tmp/slurm_cluster-apt.log" 2>&1 || rc=$?
  [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { tail -20 /tmp/slurm_cluster-apt.log >&2; die "apt-get install failed (log: /tmp/slurm_cluster-apt.log)"; }
  log "installed ($(elapsed) s)"
}

# -- config ---------------------------------------------------------------------------------------
# write_file PATH MODE OWNER: write stdin to PATH (backing up a file this script did not write).
write_file() {
  local path=$1 mode=$2 owner=$3 tmp
  if [ -e "$path" ] && ! grep -qF "$MARK" "$path"; then
    cp -p "$path" "$path.before-slurm_cluster"
    log "kept the previous $path as $path.before-slurm_cluster"
  fi
  tmp=$(mktemp "$path.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  chown "$owner" "$tmp"
  mv -f "$tmp" "$path"
}

node_line() {
  # The hardware line slurmd itself reports, e.g. CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2
  # ThreadsPerCore=1 RealMemory=24105 (a partial line makes slurmd warn about socket/core boundaries).
  local hw
  hw=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //')
  if [ -n "$CPUS" ]; then
    hw=$(sed -E -e "s/CPUs=[0-9]+/CPUs=$CPUS/" -e 's/Boards=[0-9]+/Boards=1/' \
      -e 's/SocketsPerBoard=[0-9]+/SocketsPerBoard=1/' -e "s/CoresPerSocket=[0-9]+/CoresPerSocket=$CPUS/" \
      -e 's/ThreadsPerCore=[0-9]+/ThreadsPerCore=1/' <<<"$hw")
  fi
  local gres=""
  [ "$GPUS" -gt 0 ] && gres=" Gres=gpu:$GPUS"
  echo "NodeName=localhost NodeAddr=127.0.0.1 $hw$gres State=UNKNOWN"
}

write_config() {
  mkdir -p "$CONF_DIR"
  local acct_type="accounting_storage/none" gather="jobacct_gather/none" acct_lines=""
  if [ "$ACCOUNTING" = 1 ]; then
    acct_type="accounting_storage/slurmdbd"
    gather="jobacct_gather/linux"
    acct_lines=$'AccountingStorageHost=localhost\nAccountingStoragePort=6819'
    [ "$GPUS" -gt 0 ] && acct_lines+=$'\nAccountingStorageTRES=gres/gpu'
  fi
  local proctrack="proctrack/linuxproc" task="task/none"
  if [ "$CGROUP" = 1 ]; then
    proctrack="proctrack/cgroup"
    task="task/cgroup,task/affinity"
  fi
  local extra=""
  [ -n "$CPUS" ] && extra+=$'SlurmdParameters=config_overrides\n'
  [ "$GPUS" -gt 0 ] && extra+=$'GresTypes=gpu\n'
  write_file "$CONF_DIR/slurm.conf" 644 root:root <<EOF
$MARK (do not edit: regenerated on start)
ClusterName=localcluster
SlurmctldHost=localhost
SlurmUser=slurm
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
# cred_expire also sets how long a requeued job waits before it may start again (cred_expire + 1 s; default
# 120 s). 5 is the least Slurm accepts (a smaller value is refused and falls back to 120); ample for a
# launch credential on one node. It was 10: each requeue of the tests waited 11 s, now 6 s.
AuthInfo=cred_expire=5
CredType=cred/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=$proctrack
TaskPlugin=$task
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=$acct_type
$acct_lines
JobAcctGatherType=$gather
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# schedule every second instead of every 60 s (array tasks and requeued jobs start promptly)
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without DefMemPerCPU a job with no --mem takes the whole node's memory, one job at a time
DefMemPerCPU=1024
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
${extra}$(node_line)
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  if [ "$GPUS" -gt 0 ]; then
    # Character devices with the nvidia major number, outside /dev: SLURM schedules them and sets
    # CUDA_VISIBLE_DEVICES per job (regular files or Count= without File= do not work; see the notes).
    mkdir -p "$DIR/fakegpu"
    local i files
    for ((i = 0; i < GPUS; i++)); do
      [ -c "$DIR/fakegpu/nvidia$i" ] && continue
      rm -f "$DIR/fakegpu/nvidia$i"
      if ! mknod "$DIR/fakegpu/nvidia$i" c 195 "$i" 2>/dev/null; then
        log "warning: mknod refused; fake GPUs are regular files (scheduled, but no CUDA_VISIBLE_DEVICES)"
        : >"$DIR/fakegpu/nvidia$i"
      fi
    done
    files="$DIR/fakegpu/nvidia0"
    [ "$GPUS" -gt 1 ] && files="$DIR/fakegpu/nvidia[0-$((GPUS - 1))]"
    write_file "$CONF_DIR/gres.conf" 644 root:root <<EOF
$MARK
AutoDetect=off
NodeName=localhost Name=gpu File=$files
EOF
  else
    [ -e "$CONF_DIR/gres.conf" ] && grep -qF "$MARK" "$CONF_DIR/gres.conf" && rm -f "$CONF_DIR/gres.conf"
  fi
  if [ "$CGROUP" = 1 ]; then
    write_file "$CONF_DIR/cgroup.conf" 644 root:root <<EOF
$MARK
CgroupPlugin=cgroup/v1
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainDevices=yes
EOF
  fi
  if [ "$ACCOUNTING" = 1 ]; then
    [ -s "$DIR/run/db.pass" ] || { head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$DIR/run/db.pass"; }
    chmod 600 "$DIR/run/db.pass"
    write_file "$CONF_DIR/slurmdbd.conf" 600 slurm:slurm <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$DIR/run/db.pass")
StorageLoc=slurm_acct_db
EOF
  fi
}

# -- daemons --------------------------------------------------------------------------------------
munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if pid_of munged >/dev/null; then return 0; fi
  if munge_ok; then
    log "a munged not started by this script answers: using it (stop leaves it alone)"
    return 0
  fi
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged --force </dev/null >/dev/null 2>&1
  wait_until "$WAIT_S" "munged answers" munge_ok || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$DIR/run/munged.pid"
}

db() { mariadb --no-defaults -S "$DIR/run/mysqld.sock" -u root "$@"; }

start_mariadb() {
  pid_of mariadbd >/dev/null && return 0
  if [ ! -d "$DIR/db/mysql" ]; then
    mariadb-install-db --no-defaults --user=slurm --datadir="$DIR/db" --auth-root-authentication-method=socket \
      --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 ||
      { tail -20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  setsid /usr/sbin/mariadbd --no-defaults --user=slurm --datadir="$DIR/db" --socket="$DIR/run/mysqld.sock" \
    --pid-file="$DIR/run/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
    --innodb-lock-wait-timeout=900 --log-error="$DIR/log/mariadb.log" </dev/null >/dev/null 2>&1 &
  wait_until "$WAIT_S" "MariaDB answers" db -e 'select 1' ||
    { tail -20 "$DIR/log/mariadb.log" >&2; die "MariaDB did not start (log: $DIR/log/mariadb.log)"; }
  local pass
  pass=$(cat "$DIR/run/db.pass")
  db -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
         CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

start_slurmdbd() {
  pid_of slurmdbd >/dev/null || /usr/sbin/slurmdbd </dev/null >/dev/null 2>&1
  wait_until "$WAIT_S" "slurmdbd answers" sacctmgr -n -P list cluster ||
    { tail -20 "$DIR/log/slurmdbd.log" >&2; die "slurmdbd did not start (log: $DIR/log/slurmdbd.log)"; }
}

ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_slurmctld() {
  pid_of slurmctld >/dev/null || /usr/sbin/slurmctld </dev/null >/dev/null 2>&1
  wait_until "$WAIT_S" "slurmctld answers" ctld_up ||
    { tail -20 "$DIR/log/slurmctld.log" >&2; die "slurmctld did not start (log: $DIR/log/slurmctld.log)"; }
}

start_slurmd() {
  pid_of slurmd >/dev/null || /usr/sbin/slurmd -N localhost </dev/null >/dev/null 2>&1
  wait_until "$WAIT_S" "slurmd started" pid_of slurmd ||
    { tail -20 "$DIR/log/slurmd.log" >&2; die "slurmd did not start (log: $DIR/log/slurmd.log)"; }
}

node_state() { sinfo -h -n localhost -o %T 2>/dev/null | head -1; }

wait_for_node() {
  local end=$(( $(date +%s) + WAIT_S )) resumed=0 state
  while :; do
    state=$(node_state)
    case "$state" in
      idle|mixed|allocated|completing) log "node localhost is $state: cluster ready in $(elapsed) s"; return 0 ;;
      inval*)
        scontrol show node localhost >&2 || true
        die "node localhost is INVAL: its configuration does not match what slurmd reports (see above and $DIR/log/slurmd.log)" ;;
      down*|drain*|fail*)
        if [ "$resumed" = 0 ]; then
          scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
          resumed=1
        fi ;;
    esac
    if [ "$(date +%s)" -ge "$end" ]; then
      scontrol show node localhost >&2 || true
      die "node localhost is '${state:-unknown}' after ${WAIT_S} s (log: $DIR/log/slurmd.log)"
    fi
    sleep 0.1
  done
}

foreign_check() {
  local name pid
  for name in slurmctld slurmd slurmdbd; do
    for pid in $(pgrep -x "$name" || true); do
      [ "$(pid_of "$name" || true)" = "$pid" ] && continue
      die "a $name not started by this script is running (pid $pid); stop it first"
    done
  done
}

# -- commands -------------------------------------------------------------------------------------
cmd_start() {
  local fresh=0
  [ "${1:-}" = "--fresh" ] && fresh=1
  if [ "$fresh" = 1 ]; then
    cmd_stop 0
    if [ -d "$DIR" ]; then
      if [ -e "$OWNED" ] || [ -z "$(ls -A "$DIR")" ]; then
        rm -rf -- "$DIR"
      else
        die "$DIR exists and was not created by this script; refusing to wipe it (set SLURM_LOCAL_DIR)"
      fi
    fi
  fi
  install_packages
  id slurm >/dev/null 2>&1 || die "the slurm user is missing (Debian's slurm packages create it)"
  mkdir -p "$DIR"/{ctld,spool,run,log,db}
  touch "$OWNED"
  chown slurm:slurm "$DIR"/{ctld,run,log,db}
  foreign_check
  if pid_of slurmctld >/dev/null; then
    log "slurmctld already runs: keeping its config (use restart to apply changed knobs)"
  else
    write_config
  fi
  start_munge
  if [ "$ACCOUNTING" = 1 ]; then
    start_mariadb
    start_slurmdbd
  fi
  start_slurmctld
  start_slurmd
  wait_for_node
}

# term NAME...: SIGTERM each named daemon this script started, wait up to 30 s, then SIGKILL.
term() {
  local pids=() name pid
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  local end=$(( $(date +%s) + 30 ))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$(date +%s)" -ge "$end" ]; then
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
  done
}

cmd_stop() {
  local keep_jobs=${1:-0}
  if [ "$keep_jobs" != 1 ] && pid_of slurmctld >/dev/null && ctld_up; then
    local ids
    ids=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${ids// /}" ]; then
      log "cancelling jobs: $ids"
      # shellcheck disable=SC2086
      scancel $ids 2>/dev/null || true
      local end=$(( $(date +%s) + 30 ))
      while [ -n "$(squeue -h -o %A 2>/dev/null)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.2; done
    fi
  fi
  # Each takes about 2 s to exit; slurmctld flushes its accounting to slurmdbd first, the rest together.
  term slurmd slurmctld
  term slurmdbd mariadbd munged
  rm -f "$DIR/run/munged.pid"
  log "stopped ($(elapsed) s)"
}

cmd_status() {
  local name pid rc=0
  for name in munged mariadbd slurmdbd slurmctld slurmd; do
    if pid=$(pid_of "$name"); then echo "$name: running (pid $pid)"; else echo "$name: not running"; fi
  done
  if ctld_up && pid_of slurmd >/dev/null; then
    sinfo
    squeue
  else
    rc=3
  fi
  return $rc
}

main() {
  local cmd=${1:-}
  shift || true
  case "$cmd" in
    start) check_knobs; cmd_start "$@" ;;
    stop) check_knobs; [ "${1:-}" = "--keep-jobs" ] && cmd_stop 1 || cmd_stop 0 ;;
    restart) check_knobs; cmd_stop 1; cmd_start ;;
    status) cmd_status ;;
    *) echo "usage: $0 start [--fresh] | stop [--keep-jobs] | restart | status" >&2; exit 2 ;;
  esac
}

main "$@"
