# The Slurm scripts on a real one-node cluster (munged, slurmctld, slurmd started here, all state
# under the test's temp dir, random ports, torn down on any exit):
#  - slurm/train.sbatch (mpirun) runs a short mini training to success: job COMPLETED, exit 0:0, the
#    log in results/slurm-<jobid>/<system>/resnet/ passes `mlperf-dist check`;
#  - a job cancelled mid-run with scancel ends promptly (CANCELLED), leaves no *.tmp file and no
#    log that claims success;
#  - the time-limit path: SIGUSR1 to the batch shell (what `--signal=B:USR1@120` sends), launched
#    with LAUNCHER=srun (srun --mpi=pmix): the run stops after a step and ends aborted (exit 3),
#    with a checkpoint in results/slurm-<jobid>/checkpoint where the binary has --checkpoint-dir;
#  - with a binary that has no stop handler (nor --checkpoint-dir) the signal kills the ranks, and
#    the batch script removes the partial logs they leave.
# SKIPs only where the system forbids a private cluster (see lib/slurm.bash).
source "$(dirname "$0")/lib/common.bash" "$@"
source "$(dirname "$0")/lib/slurm.bash"
trap 'slurm_down; rm -rf "$WORK"' EXIT
ensure_mini_data
# A copy of the binary under test: the jobs start it over ~30 s, and a rebuild of build/ meanwhile
# (several engineers share a machine) must not swap it mid-test.
cp "$BIN" "$WORK/mlperf-dist"
BIN=$WORK/mlperf-dist

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
t_all=$(now)
t=$(now)
slurm_up "$WORK/slurm"
echo "cluster up in $(since "$t") s: $(sinfo -h -o '%n %T %c CPUs')"

# The jobs run in $WORK (results/ lands there) with this checkout's scripts (found through the
# submitted path) and the binary under test.
export MLPERF_DIST=$BIN
# Unbound ranks: the test shares 2 cores with whatever else the machine runs.
export MPIRUN_FLAGS="--bind-to none"
submit() { sbatch --parsable --chdir="$WORK" -o "$WORK/%j.out" -t 5 "$@"; }
show() { echo "--- job $1:"; scontrol show job "$1" | grep -E "JobState|ExitCode" || true; cat "$WORK/$1.out" || true; }
wait_for_line() {  # JOB PATTERN SECONDS: the job's output shows PATTERN
  local _
  for _ in $(seq $(( $3 * 10 ))); do
    grep -q "$2" "$WORK/$1.out" 2> /dev/null && return 0
    squeue -h -j "$1" 2> /dev/null | contains . || break
    sleep 0.1
  done
  show "$1"
  fail "job $1: no '$2' in its output"
}
no_tmp_left() { ! find "$WORK/results" -name '*.tmp' | contains . || fail "temporary files left: $(find "$WORK/results" -name '*.tmp')"; }
no_success_claimed() {  # JOB
  local log
  while IFS= read -r log; do
    ! grep -q '"key":"run_stop".*"status":"success"' "$log" || fail "job $1: $log claims success"
    grep -q "status aborted" <<< "$("$BIN" check "$log" 2>&1)" || fail "job $1: check does not see $log as aborted"
  done < <(find "$WORK/results/slurm-$1" -name 'result_*.txt' 2> /dev/null)
}

# 1. A short run to success.
t=$(now)
job=$(submit "$SRC/slurm/train.sbatch" --data-dir "$DATA" --set blocks_per_stage=1 --max-steps 20 --test-target 0.05 \
      --progress-seconds 1000)
slurm_wait "$job" 120 || { show "$job"; fail "job $job still running after 120 s"; }
state=$(slurm_job_field "$job" JobState)
code=$(slurm_job_field "$job" ExitCode)
echo "job $job (train.sbatch, mpirun): $state, exit $code, in $(since "$t") s"
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || { show "$job"; fail "job $job: $state $code"; }
log=$WORK/results/slurm-$job/slurm-1x2/resnet/result_0.txt
[ -f "$log" ] || { show "$job"; find "$WORK/results"; fail "no $log"; }
grep -q "^status: success" "$WORK/$job.out" || { show "$job"; fail "job $job: no status success"; }
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "check rejected $log"; }
grep -q ": PASSED" "$WORK/check.txt" || { cat "$WORK/check.txt"; fail "check did not pass $log"; }
no_tmp_left

# 2. scancel mid-run: Slurm sends SIGTERM to every process of the job, SIGKILL after KillWait (5 s).
job=$(submit "$SRC/slurm/train.sbatch" --data-dir "$DATA" --max-steps 5000 --progress-seconds 0)
wait_for_line "$job" "step 3/" 60
t=$(now)
scancel "$job"
slurm_wait "$job" 30 || { show "$job"; fail "job $job still in squeue 30 s after scancel"; }
secs=$(since "$t")
state=$(slurm_job_field "$job" JobState)
echo "job $job (scancel): $state, exit $(slurm_job_field "$job" ExitCode), gone ${secs} s after scancel"
[ "$state" = CANCELLED ] || { show "$job"; fail "job $job: $state after scancel"; }
awk -v s="$secs" 'BEGIN { exit !(s < 15) }' || fail "job $job took ${secs} s to end after scancel"
sleep 0.5  # nothing may appear after the job has gone either
no_tmp_left
no_success_claimed "$job"
! grep -q "^status: success" "$WORK/$job.out" || { show "$job"; fail "job $job: the cancelled run reports success"; }

# 3. The time-limit signal (SIGUSR1 to the batch shell only), launched with srun --mpi=pmix.
job=$(LAUNCHER=srun submit "$SRC/slurm/train.sbatch" --data-dir "$DATA" --set blocks_per_stage=1 --max-steps 5000 \
      --progress-seconds 0)
wait_for_line "$job" "step 3/" 60
t=$(now)
scancel --batch --signal=USR1 "$job"
# The run ends after the current step, then evaluates once (10000 images) and writes its checkpoint.
slurm_wait "$job" 90 || { show "$job"; fail "job $job still running 90 s after SIGUSR1"; }
secs=$(since "$t")
state=$(slurm_job_field "$job" JobState)
code=$(slurm_job_field "$job" ExitCode)
echo "job $job (srun, SIGUSR1 to the batch shell): $state, exit $code, ended ${secs} s after the signal"
grep -q "SIGUSR1 received" "$WORK/$job.out" || { show "$job"; fail "job $job: the batch shell did not see SIGUSR1"; }
[ "$state" != COMPLETED ] || { show "$job"; fail "job $job: COMPLETED after a stop request"; }
no_success_claimed "$job"
no_tmp_left
if grep -q -- --checkpoint-dir <<< "$("$BIN" train --help)"; then  # the binary stops cleanly on the signal
  [ "$code" = 3:0 ] || { show "$job"; fail "job $job: exit $code, expected 3:0 (aborted after a stop request)"; }
  log=$(ls "$WORK/results/slurm-$job"/slurm-1x2/resnet/result_*.txt 2> /dev/null) || { show "$job"; fail "job $job: no result log"; }
  grep -q '"key":"run_stop".*"status":"aborted"' "$log" || fail "job $job: $log does not end aborted"
  ck=$WORK/results/slurm-$job/checkpoint
  [ -f "$ck/latest" ] && [ -d "$ck/$(cat "$ck/latest")" ] || { show "$job"; find "$WORK/results"; fail "job $job: no checkpoint in $ck"; }
  echo "job $job: aborted with checkpoint $(cat "$ck/latest")"
fi

# 4. A binary without a stop handler (older builds; a stand-in script): a signal kills the ranks,
# which leave their partial logs; the batch script removes them from its own folder.
cat > "$WORK/no-handler" <<'EOF'
#!/bin/bash
[ "$2" = --help ] && { echo "Usage: no-handler train (no checkpoint options)"; exit 0; }
while [ $# -gt 0 ]; do
  case "$1" in --results-dir) r=$2 ;; --system) s=$2 ;; --benchmark) b=$2 ;; esac
  shift
done
mkdir -p "$r/$s/$b" && : > "$r/$s/$b/.result_$OMPI_COMM_WORLD_RANK.txt.tmp" && echo "epoch 1 step 3/9"
exec sleep 60
EOF
chmod +x "$WORK/no-handler"
job=$(MLPERF_DIST=$WORK/no-handler submit "$SRC/slurm/train.sbatch")
wait_for_line "$job" "step 3/" 30
scancel --batch --signal=USR1 "$job"
slurm_wait "$job" 30 || { show "$job"; fail "job $job still running 30 s after SIGUSR1"; }
echo "job $job (no stop handler, SIGUSR1): $(slurm_job_field "$job" JobState), exit $(slurm_job_field "$job" ExitCode)"
grep -q "removing the partial log" "$WORK/$job.out" || { show "$job"; fail "job $job: no partial log to remove"; }
no_tmp_left
grep -q -- "--checkpoint-dir" "$WORK/$job.out" && fail "job $job: --checkpoint-dir passed to a binary without it"

# 5. scale inside an allocation: each rank count is a job step (srun --mpi=pmix), comm-bench too.
t=$(now)
job=$(submit -n 2 --wrap "'$BIN' scale --benchmark resnet --ranks 1,2 --steps 6 --data-dir '$DATA' -o '$WORK/scale-slurm'")
slurm_wait "$job" 240 || { show "$job"; fail "job $job (scale) still running after 240 s"; }
state=$(slurm_job_field "$job" JobState)
code=$(slurm_job_field "$job" ExitCode)
echo "job $job (scale in the allocation): $state, exit $code, in $(since "$t") s"
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || { show "$job"; fail "job $job: $state $code"; }
grep -q "launcher: srun --mpi=pmix -n {n}" "$WORK/$job.out" || { show "$job"; fail "job $job: scale did not launch with srun"; }
python3 - "$WORK/scale-slurm/scale.json" <<'PY' || { show "$job"; fail "job $job: scale.json is wrong"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["ranks"] for r in d["runs"]] == [1, 2], d["runs"]
assert len(d["comm"]) >= 3 and all(c["ranks"] == 2 for c in d["comm"]), d["comm"]
PY

t=$(now)
slurm_down
echo "cluster down in $(since "$t") s; slurm: ok in $(since "$t_all") s"
