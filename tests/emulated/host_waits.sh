# How often a training step makes the host wait for the GPU, per workload, counted by the CUDA
# emulator (kernels/emulate; bench_train prints the count only there, so only the emulated build
# registers this test: a GPU's count needs its profiler).
# Each wait drains the GPU: the host waits for a value, then queues the next work. A step may wait
# no more than its budget below; the budgets are today's counts, so a new wait inside a step (a
# kernel that fetches a value, a copy to pageable memory) fails here until its budget is raised
# on purpose. What the waits are today: each loss op returns its sum to the host (every workload:
# 1); gnmt's gradient clipping fetches the global norm (+1); maskrcnn samples the heads' RoIs on
# the host from the fetched proposals (+1), and its three losses each return (3).
source "$(dirname "$0")/../cli/lib/common.bash" "$@"
BENCH=$BUILD/bench/bench_train
[ -x "$BENCH" ] || fail "$BENCH is missing: build the bench_train target"
declare -A budget=([resnet]=1 [ssd]=1 [transformer]=1 [ncf]=1 [gnmt]=2 [maskrcnn]=4)
declare -A sets=([resnet]=global_batch_size=8 [ssd]=global_batch_size=4 [transformer]=global_batch_size=16
                 [ncf]=global_batch_size=256 [gnmt]=global_batch_size=16 [maskrcnn]=global_batch_size=2)
for b in resnet ncf transformer gnmt ssd maskrcnn; do
  [ -s "$DATA/${b}_mini.h5" ] || "$BIN" prepare --benchmark "$b" --scale mini --data-dir "$DATA" > /dev/null
  "$BENCH" --benchmark "$b" --data-dir "$DATA" --device cuda --steps 2 --warmup 1 --set "${sets[$b]}" \
    > "$WORK/$b.txt" 2>&1 || { tail -20 "$WORK/$b.txt"; fail "bench_train $b failed"; }
  waits=$(sed -n 's/^host waits per step (rank 0, counted by the CUDA emulator): //p' "$WORK/$b.txt")
  [ -n "$waits" ] || { cat "$WORK/$b.txt"; fail "bench_train $b printed no host-wait count: not the emulated build?"; }
  echo "$b: $waits host waits per step (budget ${budget[$b]})"
  python3 -c "import sys; sys.exit(float('$waits') > ${budget[$b]})" ||
    fail "$b waits on the GPU $waits times per step, more than its budget of ${budget[$b]}"
done
# At two ranks the gradients go through NCCL buckets from backward, ordered by events: no host wait.
"${MPIRUN[@]}" -np 2 "$BENCH" --benchmark ncf --data-dir "$DATA" --device cuda --steps 2 --warmup 1 \
  --set "${sets[ncf]}" > "$WORK/ncf2.txt" 2>&1 || { tail -20 "$WORK/ncf2.txt"; fail "bench_train ncf at 2 ranks failed"; }
grep -q "backend auto (nccl)" "$WORK/ncf2.txt" || { grep "^communication" "$WORK/ncf2.txt"; fail "ncf at 2 ranks: not NCCL"; }
waits=$(sed -n 's/^host waits per step (rank 0, counted by the CUDA emulator): //p' "$WORK/ncf2.txt")
echo "ncf at 2 ranks (NCCL): $waits host waits per step (budget ${budget[ncf]})"
python3 -c "import sys; sys.exit(float('${waits:-99}') > ${budget[ncf]})" ||
  fail "ncf at 2 ranks waits on the GPU $waits times per step, more than its budget of ${budget[ncf]}"
echo "host_waits: ok"
