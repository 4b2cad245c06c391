# Hang watchdog, end to end: one rank skips a bucketed gradient allreduce (or a blocking
# allreduce of comm/collectives.h). The job must end non-zero within the timeout plus a few
# seconds, with one line naming the collective, the bucket and the missing rank; at 2 and 4 ranks.
source "$(dirname "$0")/lib/common.bash" "$@"
TIMEOUT=3
for case in "2|--bucketed|allreduce_gradients|bucket 0" "4|--bucketed|allreduce_gradients|bucket 0" \
            "3|--backend=mpi|allreduce_sum_floats|not a gradient bucket"; do
  IFS='|' read -r np mode what bucket <<< "$case"
  hang=$((np - 1))
  start=$(date +%s.%N)
  rc=0
  timeout 120 "${MPIRUN[@]}" -np $np "$BIN" comm-bench $mode --test-hang-rank $hang --comm-timeout $TIMEOUT \
    > "$WORK/out$np.txt" 2>&1 || rc=$?
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  line=$(grep -m1 "watchdog:" "$WORK/out$np.txt" || true)
  echo "np=$np $mode rc=$rc elapsed=${elapsed}s: $line"
  [ $rc -eq 3 ] || { cat "$WORK/out$np.txt"; fail "np=$np: the job exited $rc, expected 3 (aborted)"; }
  [ $rc -ne 124 ] || [ -n "$line" ] || { cat "$WORK/out$np.txt"; fail "np=$np: timeout(1) had to kill the job"; }
  [ -n "$line" ] || { cat "$WORK/out$np.txt"; fail "np=$np: no watchdog line"; }
  echo "$line" | contains "'$what'" || fail "np=$np: the line does not name the collective $what"
  echo "$line" | contains -F "($bucket)" || fail "np=$np: the line does not name the bucket"
  echo "$line" | contains -E "not arrived: $hang \(" || fail "np=$np: the line does not name rank $hang"
  echo "$line" | contains "timeout ${TIMEOUT}.0 s" || fail "np=$np: the line does not state the timeout"
  # timeout + a few seconds (MPI start-up on a loaded 2-core machine included)
  awk -v e="$elapsed" -v t=$TIMEOUT 'BEGIN { exit !(e < t + 12) }' || fail "np=$np: took ${elapsed}s"
done
echo "comm_watchdog: ok"
