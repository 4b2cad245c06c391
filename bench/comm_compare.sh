#!/bin/bash
# Side-by-side allreduce comparison on one node, interleaved so a noisy machine hurts all columns
# alike: plain MPI_Allreduce (Open MPI defaults), plain tuned (glibc keeps freed memory + ob1/vader),
# the trainer's bucketed path (with and without the tunables) and the hierarchical backend.
# Prints, per size, the median busbw over rounds and the median single-core copy bandwidth.
# usage: bench/comm_compare.sh BIN [NP=2] [ROUNDS=3] [MIN=1M] [MAX=256M] [ITERS=5]
set -euo pipefail
BIN=${1:?mlperf-dist binary}; NP=${2:-2}; ROUNDS=${3:-3}; MIN=${4:-1M}; MAX=${5:-256M}; ITERS=${6:-5}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
MPI=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader)
TUNED=(-x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296 --mca pml ob1)
ARGS=(comm-bench -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w 1)
echo "# $(date -u +%FT%TZ) np=$NP rounds=$ROUNDS; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  "${MPI[@]}" -np "$NP" "$BIN" "${ARGS[@]}" --backend mpi --json "$W/plain.$r.json" > /dev/null
  "${MPI[@]}" "${TUNED[@]}" -np "$NP" "$BIN" "${ARGS[@]}" --backend mpi --json "$W/tuned.$r.json" > /dev/null
  "${MPI[@]}" -np "$NP" "$BIN" "${ARGS[@]}" --bucketed --json "$W/bucketed.$r.json" > /dev/null
  "${MPI[@]}" "${TUNED[@]}" -np "$NP" "$BIN" "${ARGS[@]}" --bucketed --json "$W/bucketed_tuned.$r.json" > /dev/null
  "${MPI[@]}" -np "$NP" "$BIN" "${ARGS[@]}" --backend hierarchical --json "$W/hier.$r.json" > /dev/null
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics as st, sys
w, rounds = sys.argv[1], int(sys.argv[2])
cols = ["plain", "tuned", "bucketed", "bucketed_tuned", "hier"]
runs = {c: [json.load(open(f"{w}/{c}.{r}.json")) for r in range(1, rounds + 1)] for c in cols}
copy = st.median(j["copy_gbps"] for c in cols for j in runs[c])
wrong = sum(x["wrong"] for c in cols for j in runs[c] for x in j["results"])
sizes = [x["size"] for x in runs["plain"][0]["results"]]
def med(c, i): return st.median(j["results"][i]["busbw"] for j in runs[c])
def human(b):
    for s, u in ((30, "G"), (20, "M"), (10, "K")):
        if b >= 1 << s and b % (1 << s) == 0: return f"{b >> s}{u}"
    return str(b)
print(f"# copy bandwidth (median of {len(cols) * rounds} runs): {copy:.2f} GB/s; 0.2 x copy = {0.2 * copy:.2f} GB/s; #wrong total {wrong}")
print(f"# busbw GB/s, median of {rounds} rounds")
print(f"{'size':>6} {'plain':>7} {'tuned':>7} {'bucketed':>9} {'buck+tun':>9} {'hier':>7} {'buck/copy':>9} {'vs plain':>8} {'vs tuned':>8}")
ok_goal = ok_plain = ok_tuned = True
for i, s in enumerate(sizes):
    p, t, b, bt, h = (med(c, i) for c in cols)
    flag = ""
    if s >= 1 << 20 and b < 0.2 * copy: ok_goal = False; flag += " <0.2copy"
    if b < p: ok_plain = False; flag += " <plain"
    if s >= 1 << 20 and b < t: ok_tuned = False; flag += " <tuned"
    print(f"{human(s):>6} {p:7.3f} {t:7.3f} {b:9.3f} {bt:9.3f} {h:7.3f} {b / copy:9.3f} {b / p if p else 0:8.2f} {b / t if t else 0:8.2f}{flag}")
print(f"# goal busbw >= 0.2 x copy (1M..): {'met' if ok_goal else 'NOT met'}; never below plain: {'met' if ok_plain else 'NOT met'}; above tuned (1M..): {'met' if ok_tuned else 'NOT met'}")
PY
