# ncf: the sparse exchange of the embedding tables' gradients (only the rows a step touched) gives
# the same parameters and losses, bit for bit, as the dense one (whole tables in the buckets), at 2
# and 3 ranks, with --sparse-embeddings on, off and auto; the log says which path ran and how often.
# Control: another seed must NOT give the same parameters (the comparison can fail).
source "$(dirname "$0")/lib/common.bash" "$@"
write_ratings "$WORK/ratings.csv" 7 80 3000 30
"$BIN" prepare --benchmark ncf --scale mini --from "$WORK/ratings.csv" --data-dir "$WORK/data" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare --from failed"; }
steps=10
args=(train --benchmark ncf --scale mini --data-dir "$WORK/data" --results-dir "$WORK/results"
      --set mf_dim=8 --set mlp_layer_sizes=16,16,8 --set global_batch_size=240
      --set opt_base_learning_rate=0.01 --max-steps $steps --progress-seconds 1000)
run() {  # name ranks mode [extra args]
  local name=$1 np=$2 mode=$3
  shift 3
  "${MPIRUN[@]}" -np "$np" "$BIN" "${args[@]}" --sparse-embeddings "$mode" "$@" --dump-params "$WORK/$name.bin" \
    --loss-log "$WORK/$name.loss" > "$WORK/$name.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/$name.txt"; fail "$name failed"; }
}
for np in 2 3; do
  run "off$np" $np off
  run "on$np" $np on
  run "auto$np" $np auto
  grep -q "sparse embeddings (off): not used (off" "$WORK/off$np.txt" || { grep -i sparse "$WORK/off$np.txt"; fail "$np ranks: off not logged"; }
  grep -q "sparse embeddings (on): $steps steps sparse, 0 steps dense" "$WORK/on$np.txt" || { grep -i sparse "$WORK/on$np.txt"; fail "$np ranks: on did not log $steps sparse steps"; }
  # These tables are mostly untouched in a step (80 users, ~3000 items, 240 samples): auto goes sparse.
  grep -q "sparse embeddings (auto): $steps steps sparse, 0 steps dense" "$WORK/auto$np.txt" || { grep -i sparse "$WORK/auto$np.txt"; fail "$np ranks: auto did not choose sparse"; }
  for m in on auto; do
    cmp -s "$WORK/off$np.bin" "$WORK/$m$np.bin" || fail "$np ranks: parameters differ between --sparse-embeddings off and $m"
    cmp -s "$WORK/off$np.loss" "$WORK/$m$np.loss" || fail "$np ranks: loss logs differ between --sparse-embeddings off and $m"
  done
  [ "$(wc -l < "$WORK/on$np.loss")" -eq $steps ] || fail "$np ranks: loss log has not $steps lines"
done
# 1 rank: nothing to exchange, said so.
run one 1 auto
grep -q "sparse embeddings (auto): not used (1 rank" "$WORK/one.txt" || { grep -i sparse "$WORK/one.txt"; fail "1 rank: not logged"; }
# Control: another seed, sparse on, must differ from the dense run.
run seed2 2 on --set seed=2
if cmp -s "$WORK/off2.bin" "$WORK/seed2.bin"; then fail "control: another seed gave the same parameters"; fi
echo "ncf_sparse_equivalence: ok (2 and 3 ranks, $steps steps: off == on == auto bit for bit)"
