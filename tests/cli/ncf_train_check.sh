# ncf mini end to end: prepare from r-cran-dslabs (Rscript), train at 2 ranks to the mini target,
# expect status success, and the result log passes `mlperf-dist check` (ncf is not a 0.7.0
# benchmark, so the check warns about the official checker but must report PASSED).
source "$(dirname "$0")/lib/common.bash" "$@"
command -v Rscript > /dev/null || fail "Rscript not found: run launch/install-deps (r-base-core r-cran-dslabs)"
"$BIN" prepare --benchmark ncf --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare failed"; }
"${MPIRUN[@]}" -np 2 "$BIN" train --benchmark ncf --scale mini --data-dir "$DATA" --results-dir "$WORK/results" \
  --progress-seconds 1000 > "$WORK/train.txt" 2>&1 || { tail -30 "$WORK/train.txt"; fail "training failed"; }
grep -q "^status: success" "$WORK/train.txt" || { tail -30 "$WORK/train.txt"; fail "did not reach the target"; }
log=$(sed -n 's/^result log: //p' "$WORK/train.txt")
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "check rejected the log"; }
grep -q "PASSED" "$WORK/check.txt" || { cat "$WORK/check.txt"; fail "check did not pass"; }
grep -E "^eval epoch|^time to train|^throughput" "$WORK/train.txt"
echo "ncf_train_check: ok"
