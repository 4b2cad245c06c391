# A private one-node Slurm cluster for the CLI tests: munged, slurmctld and slurmd, every file under
# one directory, ports and job ids chosen at random (and the ports checked free) so that two test
# runs on one machine, or a site's own Slurm, cannot clash. No systemd, no cgroups.
#   slurm_up DIR     starts the cluster, exports SLURM_CONF; SKIPs (exit 0) only where the system
#                    forbids it (not root); fails if a package is missing (launch/install-deps).
#   slurm_down       cancels our jobs, stops the daemons, kills whatever of ours is left (safe to
#                    call twice, and from an EXIT trap after a failure).
#   slurm_wait JOB S waits until JOB has left squeue, at most S seconds; returns 1 on timeout.
#   slurm_job_field JOB KEY   one field of `scontrol show job` (JobState, ExitCode, ...).
# SLURM_TEST_DEBUG=1 prints when each teardown stage ends (slurmctld alone takes 2-4 s to stop).
# Recipe and pitfalls: ../shared/recipes.md section 1.

SLURM_DIR=""

skip() { echo "SKIP: $*"; exit 0; }

_port_free() {  # no socket on this machine uses the port (either address column)
  local h
  h=$(printf ':%04X ' "$1")
  ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qi "$h"
}

_random_free_port_pair() {  # prints P such that P and P+1 are free
  local p
  for _ in $(seq 50); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    _port_free "$p" && _port_free $((p + 1)) && { echo "$p"; return 0; }
  done
  return 1
}

slurm_up() {
  SLURM_DIR=$1
  [ "$(id -u)" -eq 0 ] || skip "a private Slurm cluster needs root (slurmd starts job steps as the job's user)"
  local tool
  for tool in munged mungekey slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
    command -v "$tool" > /dev/null || fail "$tool is not installed: run launch/install-deps"
  done
  # munged wants o+x on every directory above its socket; mktemp -d makes 0700 directories.
  local d=$SLURM_DIR
  while [ "$d" != / ]; do
    [ -O "$d" ] && [ "$(stat -c %a "$d")" = 700 ] && chmod 711 "$d"
    d=$(dirname "$d")
  done
  mkdir -p "$SLURM_DIR"/{munge,state,spool,log}
  chmod 711 "$SLURM_DIR" "$SLURM_DIR/munge"
  local m=$SLURM_DIR/munge
  mungekey -c -k "$m/munge.key" && chmod 600 "$m/munge.key"
  munged --key-file="$m/munge.key" --socket="$m/munge.socket" --pid-file="$m/munged.pid" \
         --log-file="$m/munged.log" --seed-file="$m/seed" ||
    _start_failed munged "$m/munged.log"

  local port host mem_mb
  port=$(_random_free_port_pair) || fail "no two free TCP ports found"
  host=$(hostname -s)
  # RealMemory must not exceed what slurmd finds, or the node is drained; leave 1 GiB spare.
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  cat > "$SLURM_DIR/slurm.conf" <<EOF
ClusterName=mlpdtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/munge.socket
MailProg=/bin/true
SlurmctldPort=$port
SlurmdPort=$((port + 1))
FirstJobId=$((1000 + RANDOM * 16 + RANDOM % 16))
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  slurmctld -f "$SLURM_CONF" || _start_failed slurmctld "$SLURM_DIR/log/slurmctld.log"
  slurmd -f "$SLURM_CONF" || _start_failed slurmd "$SLURM_DIR/log/slurmd.log"
  local state=""
  for _ in $(seq 100); do
    state=$(sinfo -h -o %T 2> /dev/null) || true
    [ "$state" = idle ] && return 0
    sleep 0.1
  done
  tail -5 "$SLURM_DIR/log/slurmctld.log" "$SLURM_DIR/log/slurmd.log" >&2
  fail "the node is not idle after 10 s (state '$state')"
}

_start_failed() {  # DAEMON LOG: a refusal by the system is a SKIP, anything else a failure
  tail -5 "$2" >&2 2> /dev/null || true
  if grep -qiE "operation not permitted|permission denied" "$2" 2> /dev/null; then
    skip "$1 is not permitted to start here: $(grep -iE 'operation not permitted|permission denied' "$2" | tail -1)"
  fi
  fail "$1 did not start (log: $2)"
}

slurm_wait() {  # JOB SECONDS
  local _
  for _ in $(seq $(( $2 * 5 ))); do
    squeue -h -j "$1" 2> /dev/null | grep -q . || return 0
    sleep 0.2
  done
  return 1
}

slurm_job_field() {  # JOB KEY
  scontrol show job "$1" | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2-
}

_wait_gone() {  # PID SECONDS
  local _
  for _ in $(seq $(( $2 * 10 ))); do
    kill -0 "$1" 2> /dev/null || return 0
    sleep 0.1
  done
  return 1
}

slurm_down() {
  [ -n "$SLURM_DIR" ] && [ -f "$SLURM_DIR/slurm.conf" ] || return 0
  local conf=$SLURM_DIR/slurm.conf f p jobs
  export SLURM_CONF=$conf
  # Jobs first: job steps (slurmstepd and the ranks) outlive slurmd.
  jobs=$(squeue -h -o %i 2> /dev/null) || true
  if [ -n "$jobs" ]; then
    scancel $jobs 2> /dev/null || true
    for p in $jobs; do slurm_wait "$p" 10 || true; done
  fi
  [ -z "${SLURM_TEST_DEBUG:-}" ] || echo "slurm_down: shutdown at $(date +%T.%N)"
  scontrol shutdown 2> /dev/null || true
  # munged is not needed for the shutdown itself; stop all three at once (each takes up to ~2 s).
  [ ! -f "$SLURM_DIR/munge/munged.pid" ] || kill "$(cat "$SLURM_DIR/munge/munged.pid")" 2> /dev/null || true
  for f in slurmctld.pid slurmd.pid munge/munged.pid; do
    [ -f "$SLURM_DIR/$f" ] || continue
    p=$(cat "$SLURM_DIR/$f")
    _wait_gone "$p" 10 || { kill "$p" 2> /dev/null || true; _wait_gone "$p" 2 || kill -9 "$p" 2> /dev/null || true; }
    [ -z "${SLURM_TEST_DEBUG:-}" ] || echo "slurm_down: $f gone at $(date +%T.%N)"
  done
  # Anything still running with our SLURM_CONF in its environment was started by this cluster
  # (job steps, ranks). The grep itself is started without it.
  for f in $(env -u SLURM_CONF grep -lzxF "SLURM_CONF=$conf" /proc/[0-9]*/environ 2> /dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] || kill -9 "$p" 2> /dev/null || true
  done
  [ -z "${SLURM_TEST_DEBUG:-}" ] || echo "slurm_down: done at $(date +%T.%N)"
  SLURM_DIR=""
  return 0
}
