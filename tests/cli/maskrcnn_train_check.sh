# maskrcnn end to end at the mini scale, kept short for CI:
#  (a) prepare the Fashion-MNIST scenes with their instance masks (20,000 train, 2,000 eval);
#  (b) two epochs at 2 ranks reach a lowered --test-target (box and mask mAP 0.36: seed 1 of the
#      default config scores 0.39 and 0.34 after one epoch, 0.47 and 0.38 after two), evaluating the whole eval set with
#      boxes and pasted masks through gathered records; eval_accuracy is MLPerf's
#      {"BBOX": x, "SEGM": y}, and the log passes our `check` and MLCommons' checker (0.7.0,
#      closed_maskrcnn.yaml);
#  (c) 1 rank with two micro-batches (model_bn_span 16) and 2 ranks train to the same parameters
#      in 3 steps (the same images, flips, sampled anchors and RoIs, batch-norm groups), another
#      seed does not. Tolerance 1e-4, not ssd's 1e-5: the clean-clone CI measured 1.7e-5 (the two
#      micro-batches' gradients summed in another order than the allreduce's, through the host-side
#      losses and proposals), against 1.14 for another seed.
source "$(dirname "$0")/lib/common.bash" "$@"
"$BIN" prepare --benchmark maskrcnn --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 ||
  { cat "$WORK/prep.txt"; fail "prepare maskrcnn failed"; }
# A build directory's second run finds the file an earlier run prepared (and checked) in place.
grep -qE "20000 train, 2000 eval|exists; use --force" "$WORK/prep.txt" || { cat "$WORK/prep.txt"; fail "unexpected scene counts"; }

"${MPIRUN[@]}" -np 2 "$BIN" train --benchmark maskrcnn --scale mini --data-dir "$DATA" --results-dir "$WORK/res" \
  --system ci --set max_epochs=2 --test-target 0.36 --progress-seconds 30 > "$WORK/train.txt" 2>&1 ||
  { tail -30 "$WORK/train.txt"; fail "two epochs did not reach box and mask mAP 0.36"; }
grep -q "^status: success" "$WORK/train.txt" || { tail -30 "$WORK/train.txt"; fail "status is not success"; }
log="$WORK/res/ci/maskrcnn/result_0.txt"
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "check rejected the log"; }
python3 -m mlperf_logging.compliance_checker --usage training --ruleset 0.7.0 --log_output "$WORK/checker.log" "$log" \
  > "$WORK/checker.out" 2>&1 || { cat "$WORK/checker.out"; fail "the official checker rejected the maskrcnn log"; }
grep -q "SUCCESS" "$WORK/checker.out" || { cat "$WORK/checker.out"; fail "the official checker did not report SUCCESS"; }
grep -q '"key":"eval_accuracy","value":{"BBOX":0\.[0-9]*,"SEGM":0\.[0-9]*}' "$log" ||
  { grep eval_accuracy "$log"; fail "eval_accuracy is not {\"BBOX\": x, \"SEGM\": y}"; }
# The same log with a bare number where maskrcnn logs its two parts: `check` must reject it.
sed -E 's/"key":"eval_accuracy","value":\{"BBOX":([0-9.e-]+),"SEGM":[0-9.e-]+\}/"key":"eval_accuracy","value":\1/' \
  "$log" > "$WORK/bare.txt"
grep -q '"key":"eval_accuracy","value":0' "$WORK/bare.txt" || fail "could not write the bare-number log"
"$BIN" check "$WORK/bare.txt" > "$WORK/bare_check.txt" 2>&1 && { cat "$WORK/bare_check.txt"; fail "check passed a bare eval_accuracy"; }
grep -q 'is not an object of "BBOX" "SEGM"' "$WORK/bare_check.txt" || { cat "$WORK/bare_check.txt"; fail "no error naming the parts"; }
for k in num_image_candidates min_image_size max_image_size opt_learning_rate_warmup_factor opt_learning_rate_warmup_steps \
         opt_learning_rate_decay_steps opt_learning_rate_decay_factor model_bn_span; do
  grep -q "\"key\":\"$k\"" "$log" || fail "$k not logged"
done
grep -E "^eval epoch|^throughput" "$WORK/train.txt"
grep -qE "^eval epoch 1 \| mAP [0-9.]+ \(target [0-9.]+\) \| SEGM [0-9.]+ \(target [0-9.]+\) \| AP50" "$WORK/train.txt" ||
  fail "the eval line does not show both parts with their targets"

args=(train --benchmark maskrcnn --scale mini --data-dir "$DATA" --results-dir "$WORK/eq" --progress-seconds 1000
      --max-steps 3)
"${MPIRUN[@]}" -np 1 "$BIN" "${args[@]}" --set model_bn_span=16 --dump-params "$WORK/p1.bin" > "$WORK/o1.txt" 2>&1 ||
  [ $? -eq 3 ] || { cat "$WORK/o1.txt"; fail "1 rank failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --dump-params "$WORK/p2.bin" > "$WORK/o2.txt" 2>&1 ||
  [ $? -eq 3 ] || { cat "$WORK/o2.txt"; fail "2 ranks failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --set seed=2 --dump-params "$WORK/p3.bin" > "$WORK/o3.txt" 2>&1 ||
  [ $? -eq 3 ] || { cat "$WORK/o3.txt"; fail "seed 2 failed"; }
python3 "$(dirname "$0")/lib/compare_params.py" "$WORK/p1.bin" "$WORK/p2.bin" "$WORK/p3.bin" 1e-4 "another seed"
echo "maskrcnn_train_check: ok"
