# `mlperf-dist suite`: N runs of a benchmark with their own seeds into one folder, the olympic-mean
# score, the system description MLCommons' checker accepts, and the refusals (a folder that
# already holds results, an unknown benchmark, zero runs). Three ncf mini runs at 2 ranks.
source "$(dirname "$0")/lib/common.bash" "$@"
python3 -c "import mlperf_logging.system_desc_checker" 2>/dev/null ||
  fail "the MLCommons checker is not importable: pip install mlperf-logging (launch/install-deps does it)"
"$BIN" prepare --benchmark ncf --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare failed"; }
RES=$WORK/sub/results

set +e
"$BIN" suite --benchmarks nosuch --data-dir "$DATA" --results-dir "$RES" > "$WORK/bad.txt" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "an unknown benchmark exited $rc, not 2"; }
set +e
"$BIN" suite --benchmarks ncf --runs 0 --data-dir "$DATA" --results-dir "$RES" > "$WORK/bad.txt" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "--runs 0 exited $rc, not 2"; }
[ ! -e "$RES" ] || fail "a refused suite created $RES"

"${MPIRUN[@]}" -np 2 "$BIN" suite --benchmarks ncf --scale mini --runs 3 --seed-base 7 --system ci --data-dir "$DATA" \
  --results-dir "$RES" --progress-seconds 1000 > "$WORK/suite.txt" 2>&1 || { tail -40 "$WORK/suite.txt"; fail "suite failed"; }
sed -n '/^==== suite ====/,$p' "$WORK/suite.txt"
for i in 0 1 2; do
  f=$RES/ci/ncf/result_$i.txt
  [ -f "$f" ] || fail "no $f"
  grep -q "\"key\":\"seed\",\"value\":$((7 + i))," "$f" || fail "$f does not log seed $((7 + i))"
  grep -q '"key":"mlperf_dist_run_summary"' "$f" || fail "$f has no run summary"
  "$BIN" check "$f" > /dev/null || fail "check rejected $f"
done
[ ! -e "$RES/ci/ncf/result_3.txt" ] || fail "more than 3 runs"
grep -Eq '^ncf: score [0-9.]+ min \(olympic mean of 3 runs, 3 converged\)' "$WORK/suite.txt" || fail "no olympic-mean score line"
[ "$(grep -c 'dropped: ' "$WORK/suite.txt")" = 2 ] || fail "not exactly the fastest and the slowest run dropped"
grep -q "a study, not a result" "$WORK/suite.txt" || fail "3 ncf runs (MLPerf asks for 10) not called a study"
python3 -m mlperf_logging.system_desc_checker "$WORK/sub/systems/ci.json" training 0.7.0 \
  --log_output "$WORK/sd.log" > "$WORK/sd.txt" 2>&1 || true
grep -q "System description checker passed" "$WORK/sd.txt" || { cat "$WORK/sd.txt"; fail "the official checker rejected systems/ci.json"; }

# The folder as a set: 3 runs where MLPerf asks for 10 is not a result, and check says so.
set +e
"$BIN" check "$RES" > "$WORK/set.txt" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "3 run(s), 10 required (ncf mini)" "$WORK/set.txt" && tail -1 "$WORK/set.txt" | contains "^FAILED" ||
  { cat "$WORK/set.txt"; fail "check of the 3-run folder: exit $rc, expected 1 naming the run count"; }

# The folder now holds results: a second suite into it is refused before any run.
set +e
"$BIN" suite --benchmarks ncf --runs 3 --system ci --data-dir "$DATA" --results-dir "$RES" > "$WORK/again.txt" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/again.txt"; fail "a suite into a folder with results exited $rc, not 2"; }
grep -q "already holds result files" "$WORK/again.txt" || { cat "$WORK/again.txt"; fail "no reason given"; }
[ "$(ls "$RES/ci/ncf" | wc -l)" = 3 ] || fail "the refused suite changed the folder"
echo "suite: ok"
