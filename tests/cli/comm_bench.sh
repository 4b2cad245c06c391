# comm-bench end to end: 8 B .. 256 MiB at 2 and 4 ranks, plain MPI and the trainer's bucketed
# path, every size checked (#wrong == 0); the JSON file has the documented fields.
source "$(dirname "$0")/lib/common.bash" "$@"
for np in 2 4; do
  for mode in "--backend mpi" "--bucketed" "--backend hierarchical"; do
    "${MPIRUN[@]}" -np $np "$BIN" comm-bench -b 8 -e 256M -f 2 -n 2 -w 1 $mode --json "$WORK/r.json" \
      > "$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt"; fail "np=$np $mode: comm-bench failed"; }
    grep -q "out of bounds values : 0 OK" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "np=$np $mode: wrong values"; }
    python3 - "$WORK/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["copy_gbps"] > 0, j
sizes = [r["size"] for r in j["results"]]
assert sizes[0] == 8 and sizes[-1] == 256 << 20, sizes
for r in j["results"]:
    assert set(r) >= {"size", "count", "time_us", "algbw", "busbw", "wrong"}, r
    assert r["wrong"] == 0 and r["time_us"] > 0 and r["count"] * 4 == r["size"], r
PY
  done
done
# Other ops, overlap mode and compressed precision run and check too (small range).
"${MPIRUN[@]}" -np 2 "$BIN" comm-bench -b 1K -e 1M -f 32 -n 2 --op reduce_scatter > "$WORK/o.txt" 2>&1 || { cat "$WORK/o.txt"; fail reduce_scatter; }
"${MPIRUN[@]}" -np 3 "$BIN" comm-bench -b 1K -e 1M -f 32 -n 2 --op allgather > "$WORK/o.txt" 2>&1 || { cat "$WORK/o.txt"; fail allgather; }
"${MPIRUN[@]}" -np 2 "$BIN" comm-bench -b 1K -e 1M -f 32 -n 2 --op broadcast > "$WORK/o.txt" 2>&1 || { cat "$WORK/o.txt"; fail broadcast; }
"${MPIRUN[@]}" -np 2 "$BIN" comm-bench -b 64K -e 1M -f 4 -n 3 --bucketed --overlap --precision bf16 > "$WORK/o.txt" 2>&1 || { cat "$WORK/o.txt"; fail overlap; }
grep -q "overlap(%)" "$WORK/o.txt" || fail "overlap mode printed no overlap column"
"$BIN" comm-bench --help | contains -- "--bucketed" || fail "--help does not describe --bucketed"
"$BIN" comm-bench --help | contains -- "--device" || fail "--help does not describe --device"
"$BIN" comm-bench --help | contains "no GPU is visible or the build has no CUDA" || fail "--help does not say when --device cuda is refused"
echo "comm_bench: ok"
