# comm-bench: every bad option value is a usage error, exit 2, on every rank alike, said once
# (by rank 0), before any collective runs (no table header is printed). The harness's own checks
# are tested directly in tests/mpi/comm_bench_harness_test.cpp.
source "$(dirname "$0")/lib/common.bash" "$@"
for case in "bad size|-b 8X" "min above max|-b 1M -e 1K" "factor 1|-f 1" "no iterations|-n 0" \
            "unknown op|--op alltoall" "unknown backend|--backend tcp" "unknown precision|--precision fp8" \
            "too large for memory|-e 1024G" "side by side of a broadcast|--side-by-side --op broadcast" \
            "unknown device|--device tpu" "side by side on the GPU|--device cuda --side-by-side" \
            "not a number|-n many"; do
  IFS='|' read -r what args <<< "$case"
  rc=0
  # shellcheck disable=SC2086
  "${MPIRUN[@]}" -np 2 "$BIN" comm-bench $args > "$WORK/out.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/out.txt"; fail "$what ($args): exit $rc, expected 2"; }
  ! grep -q "^# mlperf-dist comm-bench" "$WORK/out.txt" || fail "$what ($args): the benchmark started"
  # Checked by the harness after MPI is up: rank 0 alone says it (CLI11's own parse errors come
  # earlier, from every process).
  said=$(grep -c "^mlperf-dist: error:" "$WORK/out.txt" || true)
  [ "$what" = "not a number" ] || [ "$said" -eq 1 ] || { cat "$WORK/out.txt"; fail "$what: said $said times"; }
  echo "$what ($args): exit 2, $(grep -m1 -i "error\|could not" "$WORK/out.txt")"
done
echo "comm_bench_usage_errors: ok"
