# --precision bf16: a short resnet run at 2 ranks is deterministic, follows the fp32 curve closely
# without being it, and says so in its MLPerf log; a bad value is refused.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data
args=(train --benchmark resnet --scale mini --data-dir "$DATA" --results-dir "$WORK/results"
      --set blocks_per_stage=1 --set global_batch_size=64 --max-steps 12 --progress-seconds 1000)
run() {  # NAME PRECISION
  "${MPIRUN[@]}" -np 2 "$BIN" "${args[@]}" --system "$1" --precision "$2" --loss-log "$WORK/loss_$1.txt" \
    > "$WORK/out_$1.txt" 2>&1 || [ $? -eq 3 ] || { cat "$WORK/out_$1.txt"; fail "run $1 failed"; }
}
run fp32 fp32
run bf16a bf16
run bf16b bf16
cmp "$WORK/loss_bf16a.txt" "$WORK/loss_bf16b.txt" || fail "two bf16 runs differ"
if cmp -s "$WORK/loss_fp32.txt" "$WORK/loss_bf16a.txt"; then fail "bf16 gave the fp32 curve: nothing was rounded"; fi
python3 - "$WORK/loss_fp32.txt" "$WORK/loss_bf16a.txt" <<'PY' || fail "the bf16 curve strays from the fp32 one"
import sys
def losses(path):
    return [float.fromhex(line.split()[-1]) for line in open(path) if line.strip()]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 12, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"bf16 vs fp32: first loss {a[0]:.5f} / {b[0]:.5f}, last {a[-1]:.5f} / {b[-1]:.5f}, worst relative gap {worst:.4f}")
assert worst < 0.05, worst
assert b[-1] < b[0], "bf16 loss did not go down"
PY
log=$(ls "$WORK"/results/bf16a/resnet/result_*.txt)
grep '"submission_platform"' "$log" | contains -F '(2 ranks, cpu, bf16)' || fail "platform lacks bf16: $log"
grep '"mlperf_dist_run_summary"' "$log" | contains -F '"precision":"bf16"' || fail "run summary lacks the precision"
# Which GEMM kernel ran: the bits of a bf16 run depend on it.
grep '"mlperf_dist_run_summary"' "$log" | grep -qE '"bf16_gemm":"(avx512bf16|widen\+openblas)"' ||
  fail "run summary lacks the bf16 GEMM kernel"
grep '"mlperf_dist_run_summary"' "$log" | grep -qE '"bf16_conv":"[^"]*rounded operands"' ||
  fail "run summary lacks the bf16 convolution kernel"
grep '"submission_platform"' "$WORK"/results/fp32/resnet/result_*.txt | contains -F '(2 ranks, cpu)"' ||
  fail "an fp32 run's platform changed"
# `report` keeps the two apart: the CSV's device and precision columns.
"$BIN" report "$WORK/results" --format csv > "$WORK/report.csv" 2> /dev/null
grep '^run,bf16a,' "$WORK/report.csv" | contains ',cpu,bf16,' || { cat "$WORK/report.csv"; fail "report lacks bf16"; }
grep '^run,fp32,' "$WORK/report.csv" | contains ',cpu,fp32,' || { cat "$WORK/report.csv"; fail "report lacks fp32"; }
if "$BIN" train --benchmark resnet --precision fp16 > "$WORK/bad.txt" 2>&1; then fail "--precision fp16 was accepted"; fi
contains -- "--precision" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "no clear error for --precision fp16"; }
echo "precision_bf16: 12 steps at 2 ranks, bf16 deterministic and within 5% of fp32; ok"
