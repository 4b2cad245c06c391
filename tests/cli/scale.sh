# `mlperf-dist scale`: a weak and a strong study of ncf mini at 1 and 2 ranks for a few steps. The
# JSON must hold both points with the batches the mode implies, a step split that adds up, the
# comm-bench samples and the model's prediction per point; every bad input is exit 2 before any run.
source "$(dirname "$0")/lib/common.bash" "$@"
"$BIN" prepare --benchmark ncf --scale mini --data-dir "$DATA" > /dev/null

"$BIN" scale --benchmark ncf --ranks 1,2 --weak --steps 12 --data-dir "$DATA" -o "$WORK/weak" > "$WORK/weak.txt" 2>&1 ||
  { cat "$WORK/weak.txt"; fail "weak study failed"; }
cat "$WORK/weak.txt"
python3 - "$WORK/weak/scale.json" weak <<'PY' || fail "weak scale.json is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == sys.argv[2] and d["benchmark"] == "ncf", d["mode"]
runs = d["runs"]
assert [r["ranks"] for r in runs] == [1, 2], runs
b1, b2 = runs[0]["global_batch"], runs[1]["global_batch"]
assert b2 == 2 * b1, (b1, b2)                      # weak: the per-rank batch is fixed
for r in runs:
    parts = r["compute_s"] + r["comm_s"] + r["skew_s"] + r["other_s"]
    assert abs(parts - r["step_s"]) <= 1e-9 * r["step_s"], r
    assert r["compute_s"] > 0 and r["steps"] >= 8 and r["skipped_steps"] >= 1, r
    assert r["predicted_step_s"] > 0 and "error" in r, r
assert runs[0]["skew_s"] == 0 and runs[0]["comm_s"] < 1e-4, runs[0]   # one rank: no one to wait for
assert runs[1]["comm_busy_s"] > 0, runs[1]
assert abs(runs[0]["efficiency"] - 1) < 1e-12
assert d["grad_bytes"] > 0 and len(d["comm"]) >= 3, d["comm"]
assert all(c["ranks"] == 2 for c in d["comm"])
assert "profile" in d
PY
head -1 "$WORK/weak/scale.csv" | contains "^ranks,ranks_per_node,global_batch,step_s" || fail "scale.csv header"
[ "$(wc -l < "$WORK/weak/scale.csv")" -eq 3 ] || fail "scale.csv: expected 2 rows"
[ -f "$WORK/weak/ranks_2/comm_bench.json" ] && [ -f "$WORK/weak/ranks_1/train.log" ] || fail "per-point files missing"

"$BIN" scale --benchmark ncf --ranks 1,2 --strong --steps 8 --no-comm-bench --data-dir "$DATA" -o "$WORK/strong" \
  > "$WORK/strong.txt" 2>&1 || { cat "$WORK/strong.txt"; fail "strong study failed"; }
python3 - "$WORK/strong/scale.json" <<'PY' || fail "strong scale.json is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
assert d["mode"] == "strong" and runs[0]["global_batch"] == runs[1]["global_batch"], runs
assert len(d["comm"]) == 1 and d["comm"][0]["ranks"] == 2, d["comm"]   # from the bucket spans
PY

# Usage errors: exit 2, nothing run, nothing written.
expect_usage() {
  local what=$1; shift
  set +e
  "$@" > "$WORK/err.txt" 2>&1
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$WORK/err.txt"; fail "$what: exit $rc, expected 2"; }
  echo "$what: $(grep -m1 error "$WORK/err.txt")"
}
expect_usage "descending ranks" "$BIN" scale --benchmark ncf --ranks 2,1 --data-dir "$DATA" -o "$WORK/e1"
expect_usage "existing study" "$BIN" scale --benchmark ncf --ranks 1 --data-dir "$DATA" -o "$WORK/weak"
expect_usage "launcher without {n}" "$BIN" scale --benchmark ncf --ranks 1 --data-dir "$DATA" -o "$WORK/e2" --launcher "mpirun -np 2"
expect_usage "batch set by hand" "$BIN" scale --benchmark ncf --ranks 1 --data-dir "$DATA" -o "$WORK/e3" --set global_batch_size=64
expect_usage "batch not divisible" "$BIN" scale --benchmark ncf --ranks 1,3 --strong --data-dir "$DATA" -o "$WORK/e4"
expect_usage "weak and strong" "$BIN" scale --benchmark ncf --ranks 1 --weak --strong --data-dir "$DATA" -o "$WORK/e5"
expect_usage "missing data" "$BIN" scale --benchmark ncf --ranks 1 --data-dir "$WORK/nodata" -o "$WORK/e6"
expect_usage "under mpirun" "${MPIRUN[@]}" -np 1 "$BIN" scale --benchmark ncf --ranks 1 --data-dir "$DATA" -o "$WORK/e7"
for d in e1 e2 e3 e4 e5 e6 e7; do [ ! -e "$WORK/$d/scale.json" ] || fail "$d: a usage error wrote scale.json"; done

# A launcher that fails: a clear error with the child's log, non-zero, no scale.json.
set +e
"$BIN" scale --benchmark ncf --ranks 1 --data-dir "$DATA" -o "$WORK/f" --launcher "false {n}" > "$WORK/f.txt" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a failing launcher exited 0"
contains "exited with" "$WORK/f.txt" || { cat "$WORK/f.txt"; fail "no reason given for the failed child"; }
[ ! -e "$WORK/f/scale.json" ] || fail "a failed study wrote scale.json"
echo "scale: ok"
