# A workload is one folder plus one list entry: the tiny test workload (tests/workloads/tiny/),
# registered the way resnet and ncf are, appears in --help and `rules`, trains through the real
# trainer (its own generation loop, variable batches) on 2 ranks, evaluates through gathered
# records, and `check` validates its metric's declared range [0, 100] and direction (lower is
# better). The plain binary, without the entry, does not know it.
source "$(dirname "$0")/lib/common.bash" "$@"
TINY=$BUILD/tests/mlperf-dist-tiny
[ -x "$TINY" ] || fail "no $TINY"

"$TINY" --help | contains "tiny: test workload" || fail "--help does not list the tiny workload"
"$TINY" train --help | contains "resnet, ncf, transformer, gnmt, ssd, maskrcnn, minigo, tiny" || fail "train --help does not list tiny"
"$BIN" train --help | contains "tiny" && fail "the plain binary lists tiny"
"$TINY" rules --benchmark tiny | contains "tiny.opt_name_sgd" || fail "rules does not print tiny's rows"
"$TINY" rules --benchmark tiny | contains "range \[0, 100\]" || fail "rules does not print the metric range"

"${MPIRUN[@]}" -np 2 "$TINY" train --benchmark tiny --results-dir "$WORK/res" --system t > "$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "tiny did not train to its target"; }
grep -q "status: success" "$WORK/out.txt" || fail "no success"
[ "$(grep -c '^eval epoch' "$WORK/out.txt")" -ge 2 ] || fail "expected several generations: $(cat "$WORK/out.txt")"
grep -q "mean_confidence" "$WORK/out.txt" || fail "secondary metric not printed"
log=$WORK/res/t/tiny/result_0.txt
"$TINY" check "$log" || fail "check failed on tiny's own log"
# The metric is lower-is-better, in percent: the last value is <= 25 and may exceed 1.
python3 - "$log" <<'PY'
import json, sys
acc = [json.loads(l.split(":::MLLOG ", 1)[1])["value"] for l in open(sys.argv[1]) if '"eval_accuracy"' in l]
assert len(acc) >= 2 and acc[-1] <= 25.0 and max(acc) > 1.0, acc
PY
set +e
"$BIN" check "$log" > "$WORK/c.txt" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "unknown benchmark 'tiny'" "$WORK/c.txt" || fail "plain binary: $(cat "$WORK/c.txt")"

# Out of the declared range: 150 %.
sed 's/"key":"eval_accuracy","value":[0-9.e+-]*/"key":"eval_accuracy","value":150.0/' "$log" > "$WORK/bad.txt"
set +e
"$TINY" check "$WORK/bad.txt" > "$WORK/c.txt" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "outside tiny's error% range \[0, 100\]" "$WORK/c.txt" || fail "range not checked: $(cat "$WORK/c.txt")"
# A success whose last value is above the target (lower is better) fails.
python3 - "$log" "$WORK/worse.txt" <<'PY'
import json, sys
out = []
lines = open(sys.argv[1]).read().splitlines()
last = max(i for i, l in enumerate(lines) if '"eval_accuracy"' in l)
for i, l in enumerate(lines):
    if i == last:
        j = json.loads(l.split(":::MLLOG ", 1)[1]); j["value"] = 30.0; l = ":::MLLOG " + json.dumps(j, separators=(",", ":"))
    out.append(l)
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
set +e
"$TINY" check "$WORK/worse.txt" > "$WORK/c.txt" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "does not reach the target 25" "$WORK/c.txt" || fail "direction not checked: $(cat "$WORK/c.txt")"

# --max-steps stops it: aborted, exit 3, a complete log of a run that did not converge.
set +e
"${MPIRUN[@]}" -np 2 "$TINY" train --benchmark tiny --results-dir "$WORK/res2" --system t --max-steps 3 > "$WORK/out.txt" 2>&1; rc=$?
set -e
[ $rc -eq 3 ] || { cat "$WORK/out.txt"; fail "--max-steps: exit $rc, expected 3"; }
# As MLCommons' checker: a run that stopped short of the target is a complete log but fails alone.
set +e
"$TINY" check "$WORK/res2/t/tiny/result_0.txt" > "$WORK/c.txt" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "run aborted without reaching the target" "$WORK/c.txt" && [ "$(grep -c ': error: ' "$WORK/c.txt")" = 1 ] ||
  fail "an aborted tiny log: exit $rc, expected 1 with that one error: $(cat "$WORK/c.txt")"
echo "tiny_workload: ok"
