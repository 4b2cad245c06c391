# A config that breaks an MLPerf rule, or names an unknown key, is rejected before any work with
# exit code 2 and a message naming the rule / key.
source "$(dirname "$0")/lib/common.bash" "$@"

set +e
out=$("$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/none" --set opt_base_learning_rate=0.1234 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "SGD LR 0.1234: exit code $rc, expected 2: $out"
echo "$out" | contains "opt_base_learning_rate" || fail "message does not name the key: $out"
echo "$out" | contains "0.1234" || fail "message does not name the value: $out"
echo "$out" | contains -i "rule" || fail "message does not name the rule: $out"

set +e
out=$("$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/none" --set opt_learning_rate=0.1 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "unknown key: exit code $rc, expected 2: $out"
echo "$out" | contains "opt_learning_rate" || fail "unknown key not named: $out"

cat > "$WORK/bad.yaml" <<Y
opt_name: lars
lars_opt_end_learning_rate: 0.0002
Y
set +e
out=$("${MPIRUN[@]}" -np 2 "$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/none" --config "$WORK/bad.yaml" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "LARS end LR 2e-4 accepted under mpirun"
echo "$out" | contains "lars_opt_end_learning_rate" || fail "LARS rule not named: $out"
[ "$(echo "$out" | grep -c "lars_opt_end_learning_rate")" -eq 1 ] || fail "error printed more than once: $out"
echo "rules_reject: ok"
