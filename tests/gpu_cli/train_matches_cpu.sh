# `train --device cuda` end to end against `--device cpu`: a small ncf at 2 ranks (1 on a machine
# with one GPU: NCCL takes a GPU per rank) for 12 Adam steps,
# each through the whole trainer (gradient buckets reduced by NCCL from backward with overlap on, the
# optimizer on the device, the evaluation on the device). Same seed, same data: the loss of every
# step within 1e-5 relative, the parameters within 1e-4 * (1 + |p|), and HR@10 within one user of
# 60. A CPU run with another seed must NOT match (the comparison can fail). Labelled gpu: it runs on
# a GPU, and on the CUDA emulator (launch/emulated-cuda-test); elsewhere it reports itself skipped.
source "$(dirname "$0")/../cli/lib/common.bash" "$@"
write_ratings "$WORK/ratings.csv" 7 60 5000 40
"$BIN" prepare --benchmark ncf --scale mini --from "$WORK/ratings.csv" --data-dir "$WORK/data" > "$WORK/prep.txt" 2>&1 ||
  { cat "$WORK/prep.txt"; fail "prepare --from failed"; }
args=(train --benchmark ncf --scale mini --data-dir "$WORK/data" --set mf_dim=8 --set mlp_layer_sizes=16,16,8
      --set global_batch_size=200 --set opt_base_learning_rate=0.01 --max-steps 12 --progress-seconds 1000)
ranks=2
if command -v nvidia-smi > /dev/null; then
  [ "$(nvidia-smi -L 2> /dev/null | grep -c "^GPU" || true)" -ge 2 ] || ranks=1
fi
run() {  # NAME DEVICE [ARGS...]
  local name=$1 device=$2
  shift 2
  "${MPIRUN[@]}" -np $ranks "$BIN" "${args[@]}" --device "$device" --results-dir "$WORK/r_$name" \
    --loss-log "$WORK/loss_$name.txt" --dump-params "$WORK/p_$name.bin" "$@" > "$WORK/o_$name.txt" 2>&1 || [ $? -eq 3 ]
}
run cuda cuda || true
if grep -q "no GPU is visible\|this build has no CUDA" "$WORK/o_cuda.txt"; then
  echo "[  SKIPPED ] no GPU: $(grep -o -m1 'no GPU is visible.*\|this build has no CUDA.*' "$WORK/o_cuda.txt")"
  exit 0
fi
[ -s "$WORK/loss_cuda.txt" ] || { cat "$WORK/o_cuda.txt"; fail "the cuda run failed"; }
grep -q "gradients on the GPU" "$WORK/o_cuda.txt" || { grep "^communication" "$WORK/o_cuda.txt"; fail "gradients not on the GPU"; }
run cpu cpu || { cat "$WORK/o_cpu.txt"; fail "the cpu run failed"; }
run other cpu --set seed=2 || { cat "$WORK/o_other.txt"; fail "the cpu run with seed 2 failed"; }
python3 - "$WORK/loss_cpu.txt" "$WORK/loss_cuda.txt" <<'PY' || fail "loss curves differ"
import sys
cpu = [float.fromhex(l.split()[1]) for l in open(sys.argv[1])]
gpu = [float.fromhex(l.split()[1]) for l in open(sys.argv[2])]
assert len(cpu) == len(gpu) == 12, (len(cpu), len(gpu))
worst = max(abs(c - g) / abs(c) for c, g in zip(cpu, gpu))
print(f"loss: 12 steps, worst relative difference {worst:.2e}")
sys.exit(worst > 1e-5)
PY
python3 "$SRC/tests/cli/lib/compare_params.py" "$WORK/p_cpu.bin" "$WORK/p_cuda.bin" "$WORK/p_other.bin" 1e-4 "another seed" "cpu vs cuda"
hr() { sed -n 's/^eval epoch .* | hr@10 \([0-9.]*\) .*/\1/p' "$1" | tail -1; }
h_cpu=$(hr "$WORK/o_cpu.txt")
h_cuda=$(hr "$WORK/o_cuda.txt")
python3 -c "import sys; sys.exit(abs(float('$h_cpu') - float('$h_cuda')) > 1.5 / 60)" ||
  fail "HR@10 differs: cpu '$h_cpu', cuda '$h_cuda'"
echo "train_matches_cpu: ok (ncf, $ranks rank(s), 12 steps; hr@10 cpu $h_cpu cuda $h_cuda)"
