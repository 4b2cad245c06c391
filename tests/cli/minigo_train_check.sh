# minigo end to end at the mini scale, kept short for CI:
#  (a) two generations at 2 ranks (32 self-play games each, 16 readouts, 20 training steps), each
#      evaluated by 40 games against the reference (the rollout MCTS), 40 against the random player
#      and 2 against GNU Go; the run reaches a lowered --test-target (one win in 40 against the
#      reference); the log carries MiniGo's keys (closed_minigo.yaml's train_batch_size,
#      lr_boundaries, lr_rates, min/actual selfplay games per generation; save_model, readouts,
#      virtual losses), each eval_accuracy carries the random player and GNU Go figures in its
#      metadata, and the log passes our `check`;
#  (b) 8 steps of the first generation at 1 rank with two micro-batches (model_bn_span 32) and at
#      2 ranks train to the same parameters: the same 32 games (rank 0 plays the even ones, rank 1
#      the odd ones, and the exchange puts them back in order), the same positions, symmetries and
#      batch-norm groups; another seed does not. (Not longer: rounding differences of the two
#      summation orders grow about twofold per step in this small network, past 1e-5 by step 14.)
#  (c) fewer self-play games than the rules table's mini minimum is refused before any game.
# Training to the real mini target is `mlperf-dist suite --benchmarks minigo` (README.md).
# MLCommons' closed checker is not run here: closed_minigo.yaml requires 8192 games per generation,
# the reference scale's minimum; the mini scale logs its own minimum from the rules table.
source "$(dirname "$0")/lib/common.bash" "$@"
small=(--set selfplay_games_per_generation=32 --set num_readouts=16 --set eval_readouts=16 --set steps_per_generation=20)

"${MPIRUN[@]}" -np 2 "$BIN" train --benchmark minigo --scale mini --results-dir "$WORK/res" --system ci "${small[@]}" \
  --set max_epochs=2 --test-target 0.025 --progress-seconds 30 > "$WORK/train.txt" 2>&1 ||
  { tail -30 "$WORK/train.txt"; fail "two generations did not win one game in 40 against the reference"; }
grep -q "^status: success" "$WORK/train.txt" || { tail -30 "$WORK/train.txt"; fail "status is not success"; }
log="$WORK/res/ci/minigo/result_0.txt"
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "check rejected the log"; }
for k in train_batch_size lr_boundaries lr_rates virtual_losses num_readouts window_size eval_games \
         resign_threshold disable_resign_pct; do
  grep -q "\"key\":\"$k\"" "$log" || fail "$k not logged"
done
grep -q '"key":"min_selfplay_games_per_generation","value":32,' "$log" || fail "the mini minimum (32) is not logged"
generations=$(grep -c '"key":"eval_accuracy"' "$log")
[ "$generations" -ge 1 ] || fail "no evaluation logged"
[ "$(grep -c '"key":"actual_selfplay_games_per_generation","value":32,' "$log")" = "$generations" ] ||
  fail "actual_selfplay_games_per_generation not logged once per generation"
[ "$(grep -c '"key":"save_model"' "$log")" = "$generations" ] || fail "save_model not logged once per generation"
for k in random_win_rate gnugo_win_rate gnugo_margin; do
  [ "$(grep '"key":"eval_accuracy"' "$log" | grep -c "\"$k\":")" = "$generations" ] ||
    fail "eval_accuracy does not carry $k in its metadata"
done
grep -E "self-play: 32 games|^eval epoch" "$WORK/train.txt"
grep -q "^eval epoch 1 | win_rate .* random_win_rate .* gnugo_win_rate .* gnugo_margin" "$WORK/train.txt" ||
  fail "the evaluation line lacks the random player and GNU Go figures"

args=(train --benchmark minigo --scale mini --results-dir "$WORK/eq" --progress-seconds 1000 --max-steps 8
      "${small[@]}" --set gnugo_games=0)
"${MPIRUN[@]}" -np 1 "$BIN" "${args[@]}" --set model_bn_span=32 --dump-params "$WORK/p1.bin" > "$WORK/o1.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o1.txt"; fail "1 rank failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --dump-params "$WORK/p2.bin" > "$WORK/o2.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o2.txt"; fail "2 ranks failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --set seed=2 --dump-params "$WORK/p3.bin" > "$WORK/o3.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o3.txt"; fail "seed 2 failed"; }
python3 "$(dirname "$0")/lib/compare_params.py" "$WORK/p1.bin" "$WORK/p2.bin" "$WORK/p3.bin" 1e-5 "another seed"

set +e
"$BIN" train --benchmark minigo --scale mini --results-dir "$WORK/bad" --set selfplay_games_per_generation=8 > "$WORK/bad.txt" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "8 games per generation exited $rc, not 2"; }
grep -q "minigo.games_per_generation_min" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "the rule is not named"; }
[ ! -e "$WORK/bad/ci" ] || fail "a refused run left a results folder"
echo "minigo_train_check: ok"
