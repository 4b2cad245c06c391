# ssd end to end at the mini scale, kept short for CI:
#  (a) prepare the Fashion-MNIST scenes (20,000 train, 2,000 eval; a few seconds) and check the counts;
#  (b) two epochs at 2 ranks reach a lowered --test-target (box mAP 0.25: the default config scores
#      0.21 after one epoch and 0.31 after two), evaluating the whole eval set each epoch through
#      gathered records; the log passes our `check` and MLCommons' checker (0.7.0, closed_ssd.yaml:
#      max_samples, warmup factor and steps, decay boundaries of the 40+4k/50+5k form, mAP >= 0.23);
#  (c) 1 rank with two micro-batches (model_bn_span 32) and 2 ranks train to the same parameters
#      in 4 steps (the same images, crops, flips and batch-norm groups), another seed does not.
# Training to the real mini target (0.48) is `mlperf-dist suite --benchmarks ssd` (minutes; README).
source "$(dirname "$0")/lib/common.bash" "$@"
"$BIN" prepare --benchmark ssd --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare ssd failed"; }
# A build directory's second run finds the file an earlier run prepared (and checked) in place.
grep -qE "20000 train, 2000 eval|exists; use --force" "$WORK/prep.txt" || { cat "$WORK/prep.txt"; fail "unexpected scene counts"; }

"${MPIRUN[@]}" -np 2 "$BIN" train --benchmark ssd --scale mini --data-dir "$DATA" --results-dir "$WORK/res" --system ci \
  --set max_epochs=2 --test-target 0.25 --progress-seconds 30 > "$WORK/train.txt" 2>&1 ||
  { tail -30 "$WORK/train.txt"; fail "two epochs did not reach box mAP 0.25"; }
grep -q "^status: success" "$WORK/train.txt" || { tail -30 "$WORK/train.txt"; fail "status is not success"; }
log="$WORK/res/ci/ssd/result_0.txt"
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "check rejected the log"; }
python3 -m mlperf_logging.compliance_checker --usage training --ruleset 0.7.0 --log_output "$WORK/checker.log" "$log" \
  > "$WORK/checker.out" 2>&1 || { cat "$WORK/checker.out"; fail "the official checker rejected the ssd log"; }
grep -q "SUCCESS" "$WORK/checker.out" || { cat "$WORK/checker.out"; fail "the official checker did not report SUCCESS"; }
for k in max_samples opt_learning_rate_warmup_factor opt_learning_rate_warmup_steps opt_learning_rate_decay_boundary_epochs \
         model_bn_span; do
  grep -q "\"key\":\"$k\"" "$log" || fail "$k not logged"
done
grep -E "^eval epoch|^throughput" "$WORK/train.txt"

args=(train --benchmark ssd --scale mini --data-dir "$DATA" --results-dir "$WORK/eq" --progress-seconds 1000 --max-steps 4)
"${MPIRUN[@]}" -np 1 "$BIN" "${args[@]}" --set model_bn_span=32 --dump-params "$WORK/p1.bin" > "$WORK/o1.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o1.txt"; fail "1 rank failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --dump-params "$WORK/p2.bin" > "$WORK/o2.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o2.txt"; fail "2 ranks failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --set seed=2 --dump-params "$WORK/p3.bin" > "$WORK/o3.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o3.txt"; fail "seed 2 failed"; }
python3 "$(dirname "$0")/lib/compare_params.py" "$WORK/p1.bin" "$WORK/p2.bin" "$WORK/p3.bin" 1e-5 "another seed"
echo "ssd_train_check: ok"
