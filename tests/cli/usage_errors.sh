# One exit-code convention: every CLI usage error and every rule error exits 2, says why, and
# leaves nothing under --results-dir (no result, no temporary file). A rank-dependent rule (global
# batch divisible by the ranks) is checked on every rank before any file is opened.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data

expect2() {  # expect2 WHAT GREP CMD...
  local what=$1 pattern=$2; shift 2
  set +e
  out=$("$@" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $out"
  echo "$out" | contains -i -- "$pattern" || fail "$what: message does not say '$pattern': $out"
}

R=$WORK/results
expect2 "unknown flag" "--no-such-flag" "$BIN" train --no-such-flag
expect2 "unknown subcommand" "frobnicate" "$BIN" frobnicate
expect2 "no subcommand" "subcommand" "$BIN"
expect2 "missing --config file" "does not exist" "$BIN" train --config "$WORK/nope.yaml" --results-dir "$R"
expect2 "unknown scale" "huge" "$BIN" train --scale huge --results-dir "$R"
expect2 "unknown benchmark" "nope" "$BIN" train --benchmark nope --results-dir "$R"
expect2 "prepare: unknown benchmark" "nope" "$BIN" prepare --benchmark nope
expect2 "bad log level" "loud" "$BIN" --log-level loud train
expect2 "check: missing file" "does not exist" "$BIN" check "$WORK/none.txt"
expect2 "rules: no benchmark" "benchmark" "$BIN" rules
expect2 "bad --set" "key=value" "$BIN" train --set nonsense --results-dir "$R" --data-dir "$DATA"
expect2 "2 ranks, global batch 3" "global_batch_size_multiple_of_ranks" \
  "${MPIRUN[@]}" -np 2 "$BIN" train --set global_batch_size=3 --results-dir "$R" --data-dir "$DATA"
expect2 "bn span not dividing the per-rank batch" "model_bn_span_divides_local_batch" \
  "${MPIRUN[@]}" -np 2 "$BIN" train --set model_bn_span=48 --results-dir "$R" --data-dir "$DATA"
# Values out of their valid range stop before any work, naming the rule or key.
expect2 "label smoothing 2" "resnet.label_smoothing_0_to_0.5" "$BIN" train --set label_smoothing=2 --results-dir "$R" --data-dir "$DATA"
expect2 "unknown model" "resnet.model_resnet20_or_resnet50" "$BIN" train --set model=resnet7 --results-dir "$R" --data-dir "$DATA"
expect2 "ncf: odd first MLP size" "mlp_layer_sizes" "$BIN" train --benchmark ncf --set mlp_layer_sizes=[3,4] --results-dir "$R" --data-dir "$DATA"
printf 'opt_base_learning_rate: 0.2\nopt_base_learning_rate: 0.3\n' > "$WORK/dup.yaml"
expect2 "duplicate key in a config" "appears more than once" "$BIN" train --config "$WORK/dup.yaml" --results-dir "$R" --data-dir "$DATA"
[ ! -e "$R" ] || fail "a rejected run left files: $(find "$R")"

"$BIN" --help | contains "Exit codes: 0 success; 2 usage error" || fail "--help does not state the exit codes"
"$BIN" train --help | contains "3 run aborted" || fail "train --help does not state the exit codes"
"$BIN" --help > /dev/null || fail "--help exits non-zero"
echo "usage_errors: ok"
