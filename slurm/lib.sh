# Shared by slurm/train.sbatch and slurm/suite.sbatch (sourced inside the batch job; not a job itself).
# One benchmark run on the allocation, launched with mpirun (default) or srun --mpi=pmix, with a
# stop request (SIGUSR1 or SIGTERM reaching the batch shell) passed on to the ranks as SIGUSR1.
#
# Environment (all optional):
#   LAUNCHER      mpirun (default) or srun (direct launch; Debian's Open MPI needs --mpi=pmix)
#   MLPERF_DIST   the binary (default: $MLPD_ROOT/build/mlperf-dist)
#   RESULTS_ROOT  parent of the job's results folder (default: results, relative to the job's cwd)
#   SYSTEM        --system name (default: slurm-<nodes>x<tasks per node>); letters, digits, ._-
#   SCALE         mini (default) or reference
#   MPIRUN_FLAGS  extra mpirun flags (word-split); SRUN_FLAGS the same for srun
#   CHECKPOINT_EVERY  --checkpoint-every N, where the binary has checkpoints
#   RESUME        --resume DIR (a checkpoint folder of an earlier job); a requeued job resumes from
#                 its own checkpoint folder by itself
#
# Why SIGUSR1: mpirun passes SIGUSR1 on to the ranks and keeps waiting for them, while on SIGTERM
# it kills the ranks itself about a second later (measured with Open MPI 4.1.4), too soon for a
# checkpoint. So both signals are passed on as SIGUSR1; the binary treats either as "stop after
# this step" (src/train/stop_signal.h). Slurm's own kill (scancel, time limit) still ends with
# SIGKILL after KillWait.

mlpd_die() { echo "slurm: $*" >&2; exit 2; }

[ -n "${SLURM_JOB_ID:-}" ] || mlpd_die "not inside a Slurm job (submit with sbatch)"
LAUNCHER=${LAUNCHER:-mpirun}
case "$LAUNCHER" in mpirun | srun) ;; *) mlpd_die "LAUNCHER must be mpirun or srun, not '$LAUNCHER'" ;; esac
MLPERF_DIST=${MLPERF_DIST:-$MLPD_ROOT/build/mlperf-dist}
[ -x "$MLPERF_DIST" ] || mlpd_die "no binary at $MLPERF_DIST (build it, or set MLPERF_DIST / MLPD_ROOT)"
SCALE=${SCALE:-mini}
MLPD_NODES=${SLURM_JOB_NUM_NODES:-1}
MLPD_NTASKS=${SLURM_NTASKS:-1}
SYSTEM=${SYSTEM:-slurm-${MLPD_NODES}x${SLURM_NTASKS_PER_NODE:-$((MLPD_NTASKS / MLPD_NODES))}}
# The binary rejects other names with exit 2 too, but only after the launch; say it here at once.
[[ $SYSTEM =~ ^[A-Za-z0-9_-][A-Za-z0-9._-]*$ ]] ||
  mlpd_die "SYSTEM '$SYSTEM' is not a plain name (letters, digits, '._-', no leading dot)"
MLPD_RESULTS=${RESULTS_ROOT:-results}/slurm-$SLURM_JOB_ID
mkdir -p "$MLPD_RESULTS"

MLPD_TRAIN_HELP=$("$MLPERF_DIST" train --help 2> /dev/null) || true
mlpd_has_option() { grep -q -- "$1\b" <<< "$MLPD_TRAIN_HELP"; }

# The stop request: remembered (a suite starts nothing more) and passed on as SIGUSR1.
MLPD_STOP=0
MLPD_CHILD=""
mlpd_on_signal() {
  MLPD_STOP=1
  echo "slurm: SIG$1 received at $(date +%T): asking the run to stop (SIGUSR1 to $LAUNCHER)" >&2
  [ -z "$MLPD_CHILD" ] || kill -USR1 "$MLPD_CHILD" 2> /dev/null || true
}
trap 'mlpd_on_signal USR1' USR1
trap 'mlpd_on_signal TERM' TERM

# mlpd_run BENCH [train args...]: one run; returns its exit code (0 success, 3 aborted, ...).
mlpd_run() {
  local bench=$1 ckpt rc
  shift
  local args=(train --benchmark "$bench" --scale "$SCALE" --results-dir "$MLPD_RESULTS" --system "$SYSTEM")
  if mlpd_has_option --checkpoint-dir; then
    ckpt=$MLPD_RESULTS/checkpoint
    [ "${MLPD_SUITE:-0}" = 1 ] && ckpt=$ckpt/$bench
    args+=(--checkpoint-dir "$ckpt")
    [ -z "${CHECKPOINT_EVERY:-}" ] || args+=(--checkpoint-every "$CHECKPOINT_EVERY")
    if [ -n "${RESUME:-}" ]; then
      args+=(--resume "$RESUME")
    elif [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] && [ -f "$ckpt/latest" ]; then
      args+=(--resume "$ckpt")  # a requeued job keeps its id, so its checkpoint folder is this one
    fi
  else
    [ -z "${RESUME:-}${CHECKPOINT_EVERY:-}" ] || mlpd_die "RESUME/CHECKPOINT_EVERY set, but $MLPERF_DIST has no --checkpoint-dir"
  fi
  local launch extra
  if [ "$LAUNCHER" = mpirun ]; then
    launch=(mpirun -np "$MLPD_NTASKS")
    [ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root)
    read -r -a extra <<< "${MPIRUN_FLAGS:-}"
  else
    launch=(srun --mpi=pmix -n "$MLPD_NTASKS" --kill-on-bad-exit=1)
    read -r -a extra <<< "${SRUN_FLAGS:-}"
  fi
  launch+=("${extra[@]}")
  echo "slurm: job $SLURM_JOB_ID: $bench ($SCALE) on $MLPD_NTASKS ranks, $MLPD_NODES node(s), via $LAUNCHER;" \
       "results in $MLPD_RESULTS/$SYSTEM/$bench"
  echo "slurm: ${launch[*]} $MLPERF_DIST ${args[*]} $*"
  "${launch[@]}" "$MLPERF_DIST" "${args[@]}" "$@" &
  MLPD_CHILD=$!
  while true; do
    rc=0
    wait "$MLPD_CHILD" || rc=$?
    # A trapped signal interrupts wait (rc > 128) while the launcher still runs: wait again.
    kill -0 "$MLPD_CHILD" 2> /dev/null || break
  done
  MLPD_CHILD=""
  # A rank killed outright (an old binary without the stop handler, or SIGKILL) leaves its
  # partial log as .result_*.txt.tmp; this folder is this job's alone, so remove them here.
  local t
  while IFS= read -r t; do
    echo "slurm: removing the partial log $t" >&2
    rm -f -- "$t"
  done < <(find "$MLPD_RESULTS" -name '.result_*.txt.tmp' 2> /dev/null)
  local log
  log=$(ls -t "$MLPD_RESULTS/$SYSTEM/$bench"/result_*.txt 2> /dev/null | head -1) || true
  echo "slurm: $bench ended with exit code $rc$([ $MLPD_STOP = 1 ] && echo ' (stop requested)')${log:+; log $log}"
  return "$rc"
}
