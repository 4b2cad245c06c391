# `report` end to end: a small real results folder (ten short ncf mini runs: nine at 1 rank, one at
# 2 ranks, so there is an olympic score and a scaling table), plus a copy of one log under a system
# folder whose name is markup. The page is opened in headless Chromium: the rendered DOM must hold
# the tables, one row and one curve per run, the target line, and the folder name as text, never
# as an element; the screenshot must be a PNG with much more on it than a blank page's. The text
# formats and the exit code for a folder without results are checked too.
# Scaling studies: a hand-written scale.json (as `mlperf-dist scale` writes it) renders on its own
# (its folder, its parent, the file itself), a malformed one is exit 2 naming the field, and the
# same study under the results root shows in the page's DOM beside the result folders.
# The runs are shrunk (mf_dim 8, MLP [16, 8], test target 0.2: ~1 s each) and marked open division.
source "$(dirname "$0")/lib/common.bash" "$@"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || fail "chromium not found: run launch/install-deps (it installs the chromium package)"
command -v Rscript > /dev/null || fail "Rscript not found: run launch/install-deps (r-base-core r-cran-dslabs)"
"$BIN" prepare --benchmark ncf --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare failed"; }

RES=$WORK/results
train() {  # train RANKS SEED
  "${MPIRUN[@]}" -np "$1" "$BIN" train --benchmark ncf --scale mini --data-dir "$DATA" --results-dir "$RES" --system sysA \
    --test-target 0.2 --set seed="$2" --set mf_dim=8 --set 'mlp_layer_sizes=[16,8]' --progress-seconds 1000 \
    > "$WORK/train_$2.txt" 2>&1 || { tail -20 "$WORK/train_$2.txt"; fail "training run (seed $2, $1 ranks) failed"; }
}
for seed in 1 2 3 4 5 6 7 8 9; do train 1 "$seed"; done
train 2 10
HOSTILE='sys<i>B'
mkdir -p "$RES/$HOSTILE/ncf"
cp "$RES/sysA/ncf/result_0.txt" "$RES/$HOSTILE/ncf/result_0.txt"

# No results and no scale.json: exit 2, and the message says where it looked.
mkdir -p "$WORK/empty/sub"
set +e
"$BIN" report "$WORK/empty" > "$WORK/empty.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/empty.txt"; fail "report on an empty folder exited $rc, expected 2"; }
grep -q "no result_<N>.txt" "$WORK/empty.txt" || { cat "$WORK/empty.txt"; fail "no clear message for an empty folder"; }
grep -q "no scale.json" "$WORK/empty.txt" || { cat "$WORK/empty.txt"; fail "the message does not say there is no scale.json"; }

# A scaling study alone: ncf mini, weak, 1/2/4 ranks on 2 cores per node (4 ranks oversubscribed).
write_scale() {  # write_scale FILE [python statement spoiling the dict d]
  mkdir -p "$(dirname "$1")"
  python3 - "$1" "${2:-pass}" << 'PY'
import json, sys
def run(r, rpn, step, eff, pred, err):
    return dict(ranks=r, ranks_per_node=rpn, nodes=1, steps=27, skipped_steps=3, global_batch=1024.0 * r,
                configured_global_batch=1024, work_unit="samples", step_s=step, compute_s=0.010, comm_s=step - 0.0113,
                skew_s=0.0005, other_s=0.0008, compute_cv=0.03, comm_busy_s=0.002, throughput=1024 * r / step,
                status="aborted", time_to_train_s=12.3, epochs=1, device="cpu", benchmark="ncf", scale="mini",
                grad_bytes=1.2e7, exit_code=3, efficiency=eff, predicted_step_s=pred, error=err)
d = dict(benchmark="ncf", scale="mini", mode="weak", steps=30, to_target=False, cores_per_node=2, grad_bytes=12345678.0,
         runs=[run(1, 1, 0.0123, 1.0, 0.0121, -0.016), run(2, 2, 0.0137, 0.9, 0.0140, 0.022),
               run(4, 4, 0.0246, 0.5, 0.015, -0.39)],
         points=[], comm=[], profile=dict(seconds_per_sample=9.5e-6, algo="ring", intra=dict(alpha_s=2.5e-5)))
exec(sys.argv[2])
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
}
SCALE=$WORK/scales/ncf_weak
write_scale "$SCALE/scale.json"
mkdir -p "$SCALE/ranks_1/results"
for where in "$SCALE" "$WORK/scales" "$SCALE/scale.json"; do
  "$BIN" report "$where" > "$WORK/scale.md" 2> "$WORK/scale_err.txt" ||
    { cat "$WORK/scale_err.txt"; fail "report on a scale study alone ($where) failed"; }
  grep -q '^## Scaling study: ncf mini, weak scaling, 30 steps per rank count$' "$WORK/scale.md" ||
    { cat "$WORK/scale.md"; fail "markdown ($where): no scaling study heading"; }
  grep -q '^| 2 | 2 | 2048 | 13.70 | 10.00 | 2.40 | 0.50 | 0.80 | 149489 samples/s | 90.0% | 14.00 | +2.2% |  |$' "$WORK/scale.md" ||
    { cat "$WORK/scale.md"; fail "markdown ($where): no row for 2 ranks"; }
done
grep -q '| 4 | 4 | 4096 | .* | oversubscribed |$' "$WORK/scale.md" || { cat "$WORK/scale.md"; fail "markdown: 4 ranks not oversubscribed"; }
"$BIN" report "$SCALE" -o "$WORK/scale.html" 2> "$WORK/scale_err.txt" || { cat "$WORK/scale_err.txt"; fail "report -o on a scale study failed"; }
grep -q '1 scaling study' "$WORK/scale_err.txt" || { cat "$WORK/scale_err.txt"; fail "report -o does not count the study"; }
for id in scale-runs-ncf-mini-weak scale-efficiency-ncf-mini-weak scale-split-ncf-mini-weak scale-step-time-ncf-mini-weak \
  scale-profile-ncf-mini-weak; do
  grep -q "id=\"$id\"" "$WORK/scale.html" || fail "the scale study page has no #$id"
done
# A malformed study fails the report, naming the file and the field.
write_scale "$WORK/bad/x/scale.json" 'del d["runs"][1]["step_s"]'
set +e
"$BIN" report "$WORK/bad" > "$WORK/bad.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/bad.txt"; fail "report on a malformed scale.json exited $rc, expected 2"; }
grep -q "$WORK/bad/x/scale.json: runs\[1\]: step_s: missing" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "no clear message for a malformed scale.json"; }
echo '{"benchmark": ' > "$WORK/bad/x/scale.json"
set +e
"$BIN" report "$WORK/bad" > "$WORK/bad.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/bad.txt"; fail "report on a scale.json that is not JSON exited $rc, expected 2"; }
grep -q "scale.json: not valid JSON" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "no clear message for a scale.json that is not JSON"; }
# The same study beside the result folders (a hostile benchmark name: text, never markup).
write_scale "$RES/scale_runs/ncf_weak/scale.json" 'd["benchmark"] = "nc<b>f"'

# Text formats: markdown by default on stdout, csv and json to files.
"$BIN" report "$RES" > "$WORK/report.md" || fail "report (md) failed"
grep -q "^| sysA | ncf | mini | open | 10 (10 converged, 10 required) |" "$WORK/report.md" ||
  { cat "$WORK/report.md"; fail "the markdown summary has no valid sysA/ncf row"; }
[ "$(grep -c '| success | PASSED |' "$WORK/report.md")" -eq 11 ] || { cat "$WORK/report.md"; fail "markdown: not one row per run"; }
"$BIN" report "$RES" --format csv -o "$WORK/report.csv" 2> /dev/null || fail "report (csv) failed"
[ "$(grep -c '^run,' "$WORK/report.csv")" -eq 11 ] || fail "csv: not one run row per run"
[ "$(grep -c '^benchmark,' "$WORK/report.csv")" -eq 2 ] || fail "csv: not one benchmark row per folder"
"$BIN" report "$RES" --format json -o "$WORK/report.json" 2> /dev/null || fail "report (json) failed"
python3 - "$WORK/report.json" << 'PY' || fail "json: wrong content"
import json, sys
r = json.load(open(sys.argv[1]))
b = {x["system"]: x for x in r["benchmarks"]}["sysA"]
assert b["score"]["valid"], b["score"]
assert len(b["runs"]) == 10 and all(len(run["evals"]) >= 1 for run in b["runs"])
assert [row["ranks"] for row in b["scaling"]] == [1, 2], b["scaling"]
assert b["scaling"][0]["olympic"] and b["scaling"][0]["efficiency"] == 1.0
PY

# The page.
"$BIN" report "$RES" -o "$WORK/report.html" 2> "$WORK/report_err.txt" || { cat "$WORK/report_err.txt"; fail "report -o failed"; }
[ -s "$WORK/report.html" ] || fail "no report.html written"
ls "$WORK"/.*report.html* 2> /dev/null && fail "a temporary file was left beside report.html"
# Self-contained: the only URL in the page is the SVG namespace, which is a name, not a fetch.
grep -oE 'https?://[^"<> ]+' "$WORK/report.html" | contains -v '^http://www.w3.org/2000/svg$' &&
  fail "the page refers to a network resource"
chrome() { timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/chrome" "$@" 2> "$WORK/chrome.err"; }
chrome --dump-dom "file://$WORK/report.html" > "$WORK/dom.html" || { tail "$WORK/chrome.err"; fail "chromium --dump-dom failed"; }
dom=$WORK/dom.html
# Prints the element that starts with $1 up to the first $2 after it (one line per DOM, as Chromium writes it).
section() { python3 -c 'import sys; d=open(sys.argv[1]).read(); a=d.find(sys.argv[2]); assert a>=0, sys.argv[2]; print(d[a:d.find(sys.argv[3], a)])' "$dom" "$1" "$2"; }
section '<table class="score" id="score-sysA-ncf">' '</table>' > "$WORK/score.html" || fail "the DOM has no score table for sysA/ncf"
grep -q 'class="score-value"' "$WORK/score.html" || { cat "$WORK/score.html"; fail "sysA/ncf has no valid score"; }
grep -q 'olympic mean of 8 of 10 runs' "$WORK/score.html" || { cat "$WORK/score.html"; fail "score is not the olympic mean of 8 of 10"; }
[ "$(section '<table class="runs" id="runs-sysA-ncf">' '</table>' | grep -o '<tr class="run' | wc -l)" -eq 10 ] ||
  fail "the runs table does not have one row per run"
curve=$(section 'id="curve-sysA-ncf"' '</svg>')
[ "$(grep -o '<polyline class="run-curve"' <<< "$curve" | wc -l)" -eq 10 ] || fail "the quality plot has not one curve per run"
[ "$(grep -o '<line class="target"' <<< "$curve" | wc -l)" -eq 1 ] || fail "the quality plot has no target line"
grep -q 'stroke-dasharray' <<< "$(grep -o '<line class="target"[^>]*>' <<< "$curve")" || fail "the target line is not dashed"
[ "$(section '<table class="scaling" id="scaling-sysA-ncf">' '</table>' | grep -o '<tr class="scaling-row"' | wc -l)" -eq 2 ] ||
  fail "no scaling table with rows for 1 and 2 ranks"
grep -q 'id="scaling-efficiency-sysA-ncf"' "$dom" || fail "no efficiency-vs-ranks plot"
grep -q 'id="throughput-sysA-ncf"' "$dom" || fail "no throughput figure"
# The markup in the folder name is text in the DOM, never an element.
grep -q 'sys&lt;i&gt;B' "$dom" || fail "the hostile system name is not shown as text"
grep -q '<i>B' "$dom" && fail "the hostile system name became an element"
grep -q '<script' "$dom" && fail "the page has a script"
# The scaling study beside the results: its table (one row per rank count, 4 ranks oversubscribed) and figures.
study=$(section '<section class="scale-study" id="scale-nc_b_f-mini-weak">' '</section>') || fail "the DOM has no scaling study section"
[ "$(grep -o '<tr class="scale-run' <<< "$study" | wc -l)" -eq 3 ] || fail "the scaling study table has not one row per rank count"
[ "$(grep -o '<tr class="scale-run oversubscribed" data-ranks="4">' <<< "$study" | wc -l)" -eq 1 ] ||
  fail "4 ranks on 2 cores is not marked oversubscribed"
[ "$(grep -o '<rect class="segment"' <<< "$study" | wc -l)" -eq 12 ] || fail "the step split has not four parts per rank count"
grep -q 'nc&lt;b&gt;f' <<< "$study" || fail "the hostile benchmark name is not shown as text"
grep -q 'nc<b>f' "$dom" && fail "the hostile benchmark name became an element"

# The screenshot, against a blank page of the same size as the control: the report has ink on it.
chrome --screenshot="$WORK/page.png" --window-size=1200,2000 "file://$WORK/report.html" > /dev/null ||
  { tail "$WORK/chrome.err"; fail "chromium --screenshot failed"; }
echo '<!DOCTYPE html><html><body></body></html>' > "$WORK/blank.html"
chrome --screenshot="$WORK/blank.png" --window-size=1200,2000 "file://$WORK/blank.html" > /dev/null ||
  { tail "$WORK/chrome.err"; fail "chromium --screenshot (blank control) failed"; }
[ "$(head -c 8 "$WORK/page.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "the screenshot is not a PNG"
page=$(stat -c %s "$WORK/page.png")
blank=$(stat -c %s "$WORK/blank.png")
[ "$page" -gt $((blank * 5)) ] || fail "the screenshot ($page bytes) is not much more than a blank page ($blank bytes)"
echo "report page: $(stat -c %s "$WORK/report.html") bytes; screenshot $page bytes (blank page $blank)"
echo "report_render: ok"
