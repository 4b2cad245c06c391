# The log of a real training run passes MLCommons' own compliance checker (mlperf-logging,
# --usage training --ruleset 0.7.0) and our own `check`. The run is short: two epochs of a
# 1-block-per-stage ResNet on the mini data with a compressed schedule and a lowered target given
# through the test-only --test-target flag, which marks the log division open. (The 0.7.0 rules
# require an eval_accuracy >= 0.759 in the log for open and closed alike: this run reaches it.)
source "$(dirname "$0")/lib/common.bash" "$@"
python3 -c "import mlperf_logging.compliance_checker" 2>/dev/null ||
  fail "the MLCommons checker is not importable: pip install mlperf-logging (launch/install-deps does it)"
ensure_mini_data
"${MPIRUN[@]}" -np 2 "$BIN" train --benchmark resnet --scale mini --data-dir "$DATA" --results-dir "$WORK/results" \
  --system ci --set blocks_per_stage=1 --set max_epochs=2 --set opt_learning_rate_warmup_epochs=0.2 \
  --set lr_decay_epochs=2 --test-target 0.76 --progress-seconds 10 > "$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "training run failed (it must reach the 0.76 test target in two epochs)"; }
log="$WORK/results/ci/resnet/result_0.txt"
[ -f "$log" ] || fail "no result log at $log"
grep -q '"key":"submission_division","value":"open"' "$log" || fail "a --test-target run is not marked division open"
grep -c ':::MLLOG' "$log" | contains -v '^0$' || fail "no MLLOG lines"

checker() {
  python3 -m mlperf_logging.compliance_checker --usage training --ruleset 0.7.0 --log_output "$WORK/checker.log" "$1" > "$WORK/checker.out" 2>&1
}
checker "$log" || { cat "$WORK/checker.out"; fail "the official checker rejected our log"; }
grep -q "SUCCESS" "$WORK/checker.out" || { cat "$WORK/checker.out"; fail "the official checker did not report SUCCESS"; }
"$BIN" check "$log" || fail "our check rejected the log"

# The checker really checks: the same log without run_stop must be rejected by both.
grep -v '"key":"run_stop"' "$log" > "$WORK/broken.txt"
if checker "$WORK/broken.txt"; then fail "the official checker accepted a log without run_stop"; fi
if "$BIN" check "$WORK/broken.txt" > /dev/null; then fail "our check accepted a log without run_stop"; fi
grep "eval epoch" "$WORK/out.txt"
echo "official_checker: ok"
