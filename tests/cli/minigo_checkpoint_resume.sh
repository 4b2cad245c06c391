# Checkpoints of a workload that drives its own loop (minigo: generations of self-play, training,
# evaluation): resumed from a stop inside a generation's training, or from a generation's end, it
# reaches the parameters and losses of an uninterrupted run bit for bit; the resumed log says so.
# Generations of 32 games at 8 readouts and 6 training steps keep it short (3 generations, ~20 s).
source "$(dirname "$0")/lib/common.bash" "$@"
small=(--set selfplay_games_per_generation=32 --set num_readouts=8 --set eval_readouts=8 --set steps_per_generation=6
       --set gnugo_games=0 --set max_epochs=3)
train() { "${MPIRUN[@]}" -np 2 "$BIN" train --benchmark minigo --results-dir "$WORK/res" --system t "${small[@]}" \
            --progress-seconds 1000 "$@"; }
expect_rc() { local want=$1; shift; set +e; "$@" > "$WORK/out.txt" 2>&1; local rc=$?; set -e
              [ $rc -eq "$want" ] || { cat "$WORK/out.txt"; fail "exit $rc, expected $want: $*"; }; }

# Uninterrupted: 15 steps end 3 steps into generation 3.
expect_rc 3 train --max-steps 15 --dump-params "$WORK/full.bin" --loss-log "$WORK/full.loss"
# Stopped 3 steps into generation 2, with a checkpoint after generation 1's evaluation too.
expect_rc 3 train --max-steps 9 --checkpoint-dir "$WORK/ck" --checkpoint-every 1
[ "$(cat "$WORK/ck/latest")" = "step_9" ] || fail "latest: $(cat "$WORK/ck/latest")"
ls "$WORK/ck/step_6/rank_1.ckpt" "$WORK/ck/step_9/rank_0.ckpt" "$WORK/ck/step_9/rank_1.ckpt" > /dev/null

# (a) Inside generation 2: its games come from the checkpoint, its training goes on from step 3.
expect_rc 3 train --max-steps 15 --resume "$WORK/ck" --dump-params "$WORK/mid.bin" --loss-log "$WORK/mid.loss"
grep -q "resumed from .* at step 9 (epoch 2, step 3 of it)" "$WORK/out.txt" || fail "the resume is not announced"
grep -q "generation 2 self-play" "$WORK/out.txt" && fail "generation 2 was played again"
cmp "$WORK/full.bin" "$WORK/mid.bin" || fail "resumed inside a generation: parameters differ"
diff <(awk '$1 > 9' "$WORK/full.loss") "$WORK/mid.loss" || fail "resumed inside a generation: losses differ"
log=$(grep -l mlperf_dist_resumed_from "$WORK"/res/t/minigo/result_*.txt) || fail "the resumed log does not say so"

# (b) At the end of generation 1: generation 2 is played from the restored network and window.
cp -r "$WORK/ck" "$WORK/ck6"
echo step_6 > "$WORK/ck6/latest"
expect_rc 3 train --max-steps 15 --resume "$WORK/ck6" --dump-params "$WORK/gen.bin" --loss-log "$WORK/gen.loss"
grep -q "resumed from .* at step 6 (epoch 2, step 0 of it)" "$WORK/out.txt" || fail "the resume is not announced"
cmp "$WORK/full.bin" "$WORK/gen.bin" || fail "resumed at a generation's end: parameters differ"
diff <(awk '$1 > 6' "$WORK/full.loss") "$WORK/gen.loss" || fail "resumed at a generation's end: losses differ"

# Control: one step fewer must differ (the comparison can fail).
expect_rc 3 train --max-steps 14 --resume "$WORK/ck" --dump-params "$WORK/short.bin"
! cmp -s "$WORK/full.bin" "$WORK/short.bin" || fail "control: 14 steps gave the parameters of 15"
echo "minigo_checkpoint_resume: ok"
