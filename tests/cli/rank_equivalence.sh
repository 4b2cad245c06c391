# 2 ranks with global batch B give the same parameters after N steps as 1 rank with batch B.
# Both runs use batch-norm groups of B/2 (model_bn_span), so the 1-rank run computes its batch as
# two micro-batches holding exactly the samples the two ranks hold: the mathematics is identical
# and only the order of float additions differs (gradient sum across ranks vs accumulation).
# Tolerance: |p1 - p2| <= 2e-4 * (1 + |p1|) elementwise after 10 steps of SGD at LR 0.1.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data
args=(train --benchmark resnet --scale mini --data-dir "$DATA" --results-dir "$WORK/results"
      --set blocks_per_stage=1 --set global_batch_size=64 --set model_bn_span=32 --max-steps 10 --progress-seconds 1000)
"${MPIRUN[@]}" -np 1 "$BIN" "${args[@]}" --dump-params "$WORK/p1.bin" > "$WORK/o1.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o1.txt"; fail "1 rank failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --dump-params "$WORK/p2.bin" > "$WORK/o2.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/o2.txt"; fail "2 ranks failed"; }
# A third run with a different global batch must NOT match (the comparison can fail).
"${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --set global_batch_size=128 --set model_bn_span=64 --dump-params "$WORK/p3.bin" > "$WORK/o3.txt" 2>&1 || [ $? -eq 3 ]
python3 "$(dirname "$0")/lib/compare_params.py" "$WORK/p1.bin" "$WORK/p2.bin" "$WORK/p3.bin" 2e-4 "another batch"
echo "rank_equivalence: ok"
