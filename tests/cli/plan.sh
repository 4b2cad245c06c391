# `plan`: the reference resnet plan prints its inputs with their sources, a table and a chosen batch
# with its reason; --json agrees with the table; a latency-heavy network moves the choice to a larger
# batch and a free one to a smaller (controls: the choice follows the model); a measured profile
# (scale.json) plans the mini scale; bad input exits 2 saying why.
source "$(dirname "$0")/lib/common.bash" "$@"

out=$("$BIN" plan --benchmark resnet --scale reference --ranks 256 --network 200g --json "$WORK/plan.json") ||
  fail "reference plan: exit $?"
for s in "mlperf_logging rcp_checker" "DeepLearningExamples" "25,557,032" "InfiniBand HDR" "NVLink 3" \
  "McCandlish" "Chosen: global batch" "per-step costs" "more epochs" "resnet.lars_momentum_0.9_below_32k_batch"; do
  echo "$out" | contains -F -- "$s" || fail "reference plan does not say '$s':
$out"
done
chosen_row=$(echo "$out" | grep -E '^\*' | awk '{print $2}')
[ -n "$chosen_row" ] || fail "no row marked '*': $out"
python3 - "$WORK/plan.json" "$chosen_row" <<'PY' || fail "--json disagrees with the table"
import json, sys
p = json.load(open(sys.argv[1]))
rows = p["rows"]
best = min(rows, key=lambda r: r["time_to_train_s"])
assert p["chosen_global_batch"] == best["global_batch"] == int(sys.argv[2]), (p["chosen_global_batch"], sys.argv[2])
for r in rows:
    t = r["epochs"] * r["steps_per_epoch"] * r["step_s"]
    assert abs(t - r["time_to_train_s"]) <= 1e-9 * t, r
PY
echo "plan: reference 256 ranks on 200g chooses $chosen_row"

chosen() { "$BIN" plan --ranks 256 "$@" | grep -E '^\*' | awk '{print $2}'; }
slow=$(chosen --alpha-inter-us 2000)
free=$(chosen --alpha-inter-us 0 --alpha-intra-us 0 --gbps-inter 1e9 --gbps-intra 1e9)
[ "$slow" -gt "$chosen_row" ] || fail "2 ms per message should push past batch $chosen_row, chose $slow"
[ "$free" -lt "$chosen_row" ] || fail "a free network should choose below batch $chosen_row, chose $free"
echo "plan: latency-heavy network -> $slow, free network -> $free"

cat > "$WORK/scale.json" <<'JSON'
{"benchmark": "resnet", "scale": "mini", "mode": "weak",
 "points": [
  {"ranks": 1, "ranks_per_node": 1, "global_batch": 128, "step_s": 0.50, "compute_s": 0.47, "comm_s": 0.0,
   "skew_s": 0.0, "other_s": 0.03, "compute_cv": 0.04, "comm_busy_s": 0.0}],
 "comm": [{"ranks": 2, "ranks_per_node": 2, "bytes": 4096, "seconds": 2e-5}],
 "grad_bytes": 4.36e6, "cores_per_node": 2,
 "profile": {"seconds_per_sample": 0.00367, "fixed_compute_s": 0, "other_s": 0.03, "grad_bytes": 4.36e6,
   "overlap_fraction": 0.33, "compute_cv": 0.04, "cores_per_node": 2, "threads_per_rank": 1, "algo": "allgather",
   "intra": {"alpha_s": 1.5e-5, "beta_s_per_byte": 3.5e-10}, "comm_fit_rms": 0.05, "source": "plan.sh"}}
JSON
out=$("$BIN" plan --profile "$WORK/scale.json" --ranks 8) || fail "mini plan: exit $?"
echo "$out" | contains "one convergence point" || fail "mini plan does not say epochs are held: $out"
echo "$out" | contains -E '^\*' || fail "mini plan chose nothing: $out"

expect2() {  # expect2 WHAT PATTERN ARGS...
  local what=$1 pattern=$2 rc=0; shift 2
  err=$("$BIN" plan "$@" 2>&1 > /dev/null) || rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $err"
  echo "$err" | contains -F -- "$pattern" || fail "$what: message does not say '$pattern': $err"
}
expect2 "unknown benchmark" "nope" --benchmark nope --ranks 8
expect2 "unknown network" "300g" --ranks 8 --network 300g
expect2 "zero ranks" "--ranks must be >= 1" --ranks 0
expect2 "missing profile" "cannot be opened" --ranks 8 --profile "$WORK/none.json"
echo '{"benchmark": "resnet"' > "$WORK/broken.json"
expect2 "profile not JSON" "not valid JSON" --ranks 8 --profile "$WORK/broken.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['profile']['algo']; json.dump(d, open(sys.argv[2], 'w'))" \
  "$WORK/scale.json" "$WORK/noalgo.json"
expect2 "profile field missing" "'algo' is missing" --ranks 8 --profile "$WORK/noalgo.json"
expect2 "profile of another scale" "measured for resnet at scale mini" --ranks 8 --profile "$WORK/scale.json" --scale reference
expect2 "mini without a profile" "needs --profile" --ranks 8 --scale mini
expect2 "batch not a multiple of ranks" "not a positive multiple" --ranks 64 --batches 100,200
expect2 "host network without a profile" "needs a link measured" --ranks 8 --network host
expect2 "sweep of zero ranks" "" --ranks 8 --sweep 0,8

# --sweep: one row per rank count, each the least time of its own plan (the JSON agrees).
"$BIN" plan --benchmark resnet --scale reference --ranks 256 --network 200g --sweep 8,64,256,1024 \
  --json "$WORK/sweep.json" > "$WORK/sweep.txt" || fail "plan --sweep failed"
grep -A6 "^across rank counts" "$WORK/sweep.txt"
python3 - "$WORK/sweep.json" <<'PY' || fail "plan --sweep JSON is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["sweep"]
assert [r["ranks"] for r in s] == [8, 64, 256, 1024], s
at256 = [r for r in s if r["ranks"] == 256][0]
assert at256["global_batch"] == d["chosen_global_batch"], (at256, d["chosen_global_batch"])
assert all(0 < r["efficiency"] <= 1 for r in s), s
assert s[0]["nodes"] == 1 and s[-1]["nodes"] == 128, s
times = [r["time_to_train_s"] for r in s]
assert times == sorted(times, reverse=True), times   # more ranks, less time on this network
PY
echo "plan: OK"
