# Checkpoints: a run stopped early (--max-steps, or SIGUSR1 to mpirun as `sbatch --signal` sends it)
# writes one; --resume continues to the same final parameters and losses as an uninterrupted run,
# bit for bit; a checkpoint from another config or rank count is refused (exit 2); a resumed run
# is logged as such.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data
train() { "${MPIRUN[@]}" -np "${NP:-2}" "$BIN" train --data-dir "$DATA" --results-dir "$WORK/res" --system t \
            --progress-seconds 1000 "$@"; }
expect_rc() { local want=$1; shift; set +e; "$@" > "$WORK/out.txt" 2>&1; local rc=$?; set -e
              [ $rc -eq "$want" ] || { cat "$WORK/out.txt"; fail "exit $rc, expected $want: $*"; }; }

expect_rc 3 train --max-steps 24 --dump-params "$WORK/full.bin" --loss-log "$WORK/full.loss"
expect_rc 3 train --max-steps 10 --checkpoint-dir "$WORK/ck"
[ "$(cat "$WORK/ck/latest")" = "step_10" ] || fail "latest: $(cat "$WORK/ck/latest")"
ls "$WORK/ck/step_10/rank_0.ckpt" "$WORK/ck/step_10/rank_1.ckpt" > /dev/null
! find "$WORK/ck" -name '*.tmp' | contains . || fail "temporary files left in the checkpoint"
expect_rc 3 train --max-steps 24 --resume "$WORK/ck" --dump-params "$WORK/resumed.bin" --loss-log "$WORK/resumed.loss"
grep -q "resumed from" "$WORK/out.txt" || fail "the resume is not announced"
cmp "$WORK/full.bin" "$WORK/resumed.bin" || fail "resumed parameters differ from the uninterrupted run"
diff <(awk '$1 > 10' "$WORK/full.loss") "$WORK/resumed.loss" || fail "resumed losses differ"
log=$(grep -l mlperf_dist_resumed_from "$WORK"/res/t/resnet/result_*.txt) || fail "the resumed log does not say so"
set +e
"$BIN" check "$log" > "$WORK/c.txt" 2>&1
set -e
grep -q "resumed from a checkpoint: not a valid MLPerf result" "$WORK/c.txt" || fail "check accepts a resumed run: $(cat "$WORK/c.txt")"
# Control: resuming from an earlier checkpoint state must differ (the comparison can fail).
expect_rc 3 train --max-steps 23 --resume "$WORK/ck" --dump-params "$WORK/short.bin"
! cmp -s "$WORK/full.bin" "$WORK/short.bin" || fail "control: 23 steps gave the parameters of 24"

# Refused: another config, another rank count.
expect_rc 2 train --max-steps 24 --resume "$WORK/ck" --set seed=2
grep -q "different config" "$WORK/out.txt" || fail "config mismatch not named: $(cat "$WORK/out.txt")"
NP=1 expect_rc 2 train --max-steps 24 --resume "$WORK/ck"
grep -q "2 ranks, not 1" "$WORK/out.txt" || fail "rank mismatch not named: $(cat "$WORK/out.txt")"

# SIGUSR1 to mpirun: every rank stops after the same step, checkpoints, ends aborted (exit 3).
set +e
"${MPIRUN[@]}" -np 2 "$BIN" train --data-dir "$DATA" --results-dir "$WORK/res" --system t --progress-seconds 0 \
  --max-steps 2000 --checkpoint-dir "$WORK/sig" > "$WORK/sig.txt" 2>&1 &
pid=$!
for i in $(seq 300); do grep -q "^epoch 1 step 5/" "$WORK/sig.txt" && break; sleep 0.1; done
t0=$(date +%s.%N)
kill -USR1 $pid
wait $pid; rc=$?
set -e
secs=$(echo "$(date +%s.%N) - $t0" | bc)
echo "SIGUSR1: exit $rc after ${secs}s"
[ $rc -eq 3 ] || { cat "$WORK/sig.txt"; fail "SIGUSR1: exit $rc, expected 3"; }
grep -q "stop requested by a signal" "$WORK/sig.txt" || fail "no stop message"
step=$(sed 's/step_//' "$WORK/sig/latest")
[ "$step" -ge 5 ] && [ "$step" -lt 2000 ] || fail "checkpoint step $step"
expect_rc 3 train --max-steps $((step + 3)) --resume "$WORK/sig" --dump-params "$WORK/sig_resumed.bin"
expect_rc 3 train --max-steps $((step + 3)) --dump-params "$WORK/sig_full.bin"
cmp "$WORK/sig_full.bin" "$WORK/sig_resumed.bin" || fail "resumed after SIGUSR1: parameters differ"
echo "checkpoint_resume: ok (signal at step $step)"
