# How often, and where, a training step makes the host wait for the GPU, per workload, counted by
# the CUDA emulator (kernels/emulate; bench_train prints the count only there, so only the emulated
# build registers this test: a GPU's count needs its profiler). Each wait drains the GPU: the host
# waits for a value, then queues the next work.
# - The count: a step may wait no more than its budget below (today's counts): the trainer reads
#   the step's loss once, after queuing the optimizer (every workload: 1; the loss ops add their
#   sums on the device, src/workloads/step_loss.h, and gnmt's gradient clipping works its ratio out
#   there; maskrcnn samples the heads' RoIs and makes the mask targets on the device).
# - The place: no wait inside a workload's forward and backward (its train_step). Each wait's
#   call stack (MLPD_EMULATE_HOST_WAITS) is named with addr2line, and a site
#   counts when it waits in the steps after the first (buffers that grow once are not a step's).
source "$(dirname "$0")/../cli/lib/common.bash" "$@"
BENCH=$BUILD/bench/bench_train
[ -x "$BENCH" ] || fail "$BENCH is missing: build the bench_train target"
command -v addr2line > /dev/null || fail "addr2line (binutils) is missing"
declare -A budget=([resnet]=1 [ssd]=1 [transformer]=1 [ncf]=1 [gnmt]=1 [maskrcnn]=1)
declare -A sets=([resnet]=global_batch_size=8 [ssd]=global_batch_size=4 [transformer]=global_batch_size=16
                 [ncf]=global_batch_size=256 [gnmt]=global_batch_size=16 [maskrcnn]=global_batch_size=2)
# Per site, the waits of steps 2 and 3 (a run of 3 steps less a run of 1), named; fails on a site
# inside a workload's train_step other than ALLOWED (a function name, or "-").
check_sites() {  # WORKLOAD ALLOWED
  python3 - "$WORK/$1_1" "$WORK/$1_3" "$2" <<'PY'
import collections, glob, subprocess, sys
def sites(directory):  # every process's waits.<pid>.txt
    out = collections.Counter()
    for path in glob.glob(directory + "/waits.*.txt"):
        for line in open(path):
            if line.startswith("cuda emulator: wait site "):
                words = line.split()
                out[tuple(words[5:])] += int(words[4])
    return out
one, three, allowed = sites(sys.argv[1]), sites(sys.argv[2]), sys.argv[3]
if not three:  # every step waits once at least (its loss): no sites means no report was written
    sys.exit(f"no wait sites in {sys.argv[2]}: MLPD_EMULATE_HOST_WAITS not honoured?")
names = {}
def name(frame):
    if frame not in names:
        module, _, offset = frame.rpartition("+")
        r = subprocess.run(["addr2line", "-f", "-C", "-e", module, offset], capture_output=True, text=True)
        names[frame] = r.stdout.splitlines()[0] if r.stdout else "??"
    return names[frame]
bad = 0
for stack, count in sorted(three.items()):
    per_step = (count - one.get(stack, 0)) / 2
    if per_step <= 0:
        continue
    funcs = [name(f) for f in stack]
    inside = any("Workload::train_step(" in f for f in funcs)
    where = " < ".join(f.replace("(anonymous namespace)::", "").split("(")[0] for f in funcs[:4])
    ok = not inside or any(allowed in f for f in funcs)
    print(f"  {per_step:g} per step {'inside the step' if inside else 'outside forward/backward'}: {where}"
          + ("" if ok else "   <- not allowed"))
    bad += not ok
sys.exit(bad > 0)
PY
}
run_bench() {  # WORKLOAD STEPS: the wait sites in $WORK/WORKLOAD_STEPS/
  local b=$1 steps=$2
  mkdir -p "$WORK/${b}_$steps"
  MLPD_EMULATE_HOST_WAITS="$WORK/${b}_$steps" "$BENCH" --benchmark "$b" --data-dir "$DATA" --device cuda --steps "$steps" \
    --warmup 1 --set "${sets[$b]}" > "$WORK/${b}_$steps.txt" 2>&1 ||
    { tail -20 "$WORK/${b}_$steps.txt"; fail "bench_train $b ($steps steps) failed"; }
}
for b in resnet ncf transformer gnmt ssd maskrcnn; do
  [ -s "$DATA/${b}_mini.h5" ] || "$BIN" prepare --benchmark "$b" --scale mini --data-dir "$DATA" > /dev/null
  run_bench "$b" 1
  run_bench "$b" 3
  waits=$(sed -n 's/^host waits per step (rank 0, counted by the CUDA emulator): //p' "$WORK/${b}_3.txt")
  [ -n "$waits" ] || { cat "$WORK/${b}_3.txt"; fail "bench_train $b printed no host-wait count: not the emulated build?"; }
  echo "$b: $waits host waits per step (budget ${budget[$b]})"
  python3 -c "import sys; sys.exit(float('$waits') > ${budget[$b]})" ||
    fail "$b waits on the GPU $waits times per step, more than its budget of ${budget[$b]}"
  check_sites "$b" - || fail "$b waits for the GPU inside its forward or backward"
done
# At two ranks the gradients go through NCCL buckets from backward, ordered by events: no host wait.
for steps in 1 3; do
  mkdir -p "$WORK/ncf2_$steps"
  MLPD_EMULATE_HOST_WAITS="$WORK/ncf2_$steps" "${MPIRUN[@]}" -np 2 "$BENCH" --benchmark ncf --data-dir "$DATA" --device cuda \
    --steps $steps --warmup 1 --set "${sets[ncf]}" > "$WORK/ncf2_$steps.txt" 2>&1 ||
    { tail -20 "$WORK/ncf2_$steps.txt"; fail "bench_train ncf at 2 ranks failed"; }
done
grep -q "backend auto (nccl)" "$WORK/ncf2_3.txt" || { grep "^communication" "$WORK/ncf2_3.txt"; fail "ncf at 2 ranks: not NCCL"; }
waits=$(sed -n 's/^host waits per step (rank 0, counted by the CUDA emulator): //p' "$WORK/ncf2_3.txt")
echo "ncf at 2 ranks (NCCL): $waits host waits per step (budget ${budget[ncf]})"
python3 -c "import sys; sys.exit(float('${waits:-99}') > ${budget[ncf]})" ||
  fail "ncf at 2 ranks waits on the GPU $waits times per step, more than its budget of ${budget[ncf]}"
check_sites ncf2 - || fail "ncf at 2 ranks waits for the GPU inside its forward or backward"
echo "host_waits: ok"
