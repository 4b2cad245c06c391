# Faults end the job promptly and leave nothing half-written:
#  - an error on one rank after the communicator exists (rank 1 mid-run, rank 0 before run_start)
#    ends the whole job within seconds, with the error printed (before: the unwinding entered a
#    collective in a destructor and the job hung until the 600 s watchdog);
#  - --system cannot put results outside --results-dir;
#  - an auxiliary output never replaces a result log;
#  - a full disk (a small tmpfs) leaves no result_N.txt and no temporary file;
#  - SIGKILL to one rank mid-run, and SIGINT or SIGTERM to mpirun, end the job non-zero within the
#    watchdog timeout (--comm-timeout 10) + 5 s, leaving no temporary file and no result counted as
#    a success; the times to the first sign and to the end are printed.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data
R=$WORK/results
run() {  # run NP ARGS...: sets rc, out, secs
  local np=$1; shift
  local t0=$(date +%s.%N)
  set +e
  out=$(timeout 120 "${MPIRUN[@]}" -np "$np" "$BIN" train --data-dir "$DATA" --results-dir "$R" --system t \
        --progress-seconds 1000 "$@" 2>&1)
  rc=$?
  set -e
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
}
no_tmp_left() { ! find "$R" -name '*.tmp' 2>/dev/null | contains . || fail "temporary files left: $(find "$R" -name '*.tmp')"; }

# One rank fails mid-run (after run_start): the job ends at once; rank 0 was killed, so no result.
run 2 --max-steps 50 --test-fail-at 1:3
echo "rank 1 fails in step 3: rc=$rc in ${secs}s"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "rank 1's error: rc $rc: $out"
echo "$out" | contains "test fault (--test-fail-at): rank 1 fails in step 3" || fail "the error is not printed: $out"
awk -v s="$secs" 'BEGIN { exit !(s < 60) }' || fail "took ${secs}s to end the job"
! ls "$R"/t/resnet/result_*.txt 2>/dev/null | contains . || fail "a result log was written"
! find "$R" -type f | contains . || fail "rank 0 was killed and left files: $(find "$R" -type f)"

# Rank 0 fails mid-run: its log is complete, ending with run_stop status aborted, and never counted.
rm -rf "$R"
run 2 --max-steps 50 --test-fail-at 0:2
echo "rank 0 fails in step 2: rc=$rc in ${secs}s"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "rank 0's error: rc $rc: $out"
awk -v s="$secs" 'BEGIN { exit !(s < 60) }' || fail "took ${secs}s to end the job"
log=$(ls "$R"/t/resnet/result_*.txt)
grep -q '"key":"run_stop".*"status":"aborted"' "$log" || fail "no run_stop aborted in $log"
tail -1 "$log" | contains '"key":"run_stop"' || fail "run_stop is not the last line of $log"
set +e
"$BIN" check "$log" > "$WORK/c.txt" 2>&1
set -e
grep -q "status aborted" "$WORK/c.txt" && ! grep -q ": PASSED" "$WORK/c.txt" || fail "check counts the failed run: $(cat "$WORK/c.txt")"
no_tmp_left

# Rank 0 cannot write its loss log (after the communicator exists, before run_start): prompt, no log.
rm -rf "$R"
run 2 --max-steps 5 --loss-log /proc/no/such/dir/loss.txt
echo "rank 0 cannot write the loss log: rc=$rc in ${secs}s"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "unwritable loss log: rc $rc: $out"
echo "$out" | contains "/proc/no/such/dir/loss.txt" || fail "the error does not name the file: $out"
awk -v s="$secs" 'BEGIN { exit !(s < 60) }' || fail "took ${secs}s to end the job"
! find "$R" -type f | contains . || fail "files left: $(find "$R" -type f)"

# Path escape through --system.
rm -rf "$R"
for bad in "../escape" "a/b" ".hidden" "" "x y"; do
  run 1 --max-steps 1 --system "$bad"
  [ $rc -eq 2 ] || fail "--system '$bad': rc $rc: $out"
done
[ ! -e "$WORK/escape" ] && [ ! -e "$R" ] || fail "--system escaped: $(find "$WORK")"

# Clobbering: auxiliary outputs never replace a result log.
run 1 --max-steps 2
log=$(ls "$R"/t/resnet/result_0.txt)
sum=$(md5sum < "$log")
for opt in --loss-log --dump-params --trace; do
  run 1 --max-steps 2 $opt "$log"
  [ $rc -eq 2 ] || fail "$opt onto a result log: rc $rc: $out"
  cp "$log" "$WORK/copy.txt"
  run 1 --max-steps 2 $opt "$WORK/copy.txt"
  [ $rc -eq 2 ] || fail "$opt onto a file holding MLLOG lines: rc $rc: $out"
done
run 1 --max-steps 2 --loss-log "$WORK/a.txt" --dump-params "$WORK/a.txt"
[ $rc -eq 2 ] || fail "two outputs on one file: rc $rc"
[ "$(md5sum < "$log")" = "$sum" ] || fail "the result log changed"

# Signals mid-run: mpirun started in the background, the signal sent after step 5 is printed.
signal_fault() {  # NAME TARGET(rank1|mpirun) SIGNAL
  local name=$1 target=$2 sig=$3 out=$WORK/sig_$1.txt pid victim t0 td="" te rc=0
  rm -rf "$R"
  "${MPIRUN[@]}" -np 2 "$BIN" train --data-dir "$DATA" --results-dir "$R" --system t --progress-seconds 0 \
    --max-steps 100000 --comm-timeout 10 > "$out" 2>&1 &
  pid=$!
  for i in $(seq 600); do grep -q "^epoch 1 step 5/" "$out" && break; sleep 0.1; done
  grep -q "^epoch 1 step 5/" "$out" || { cat "$out"; fail "$name: the run did not reach step 5"; }
  victim=$pid
  if [ "$target" = rank1 ]; then
    victim=""
    for q in $(pgrep -P "$pid"); do
      tr '\0' '\n' < /proc/$q/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$q
    done
    [ -n "$victim" ] || fail "$name: rank 1 not found among mpirun's children"
  fi
  t0=$(date +%s.%N)
  kill -"$sig" "$victim"
  while kill -0 "$pid" 2> /dev/null; do
    [ -z "$td" ] && grep -qE "mpirun noticed|exited on signal|non-zero|stop requested|aborting|killed" "$out" && td=$(date +%s.%N)
    [ "$(echo "$(date +%s.%N) - $t0 > 40" | bc)" = 1 ] && break
    sleep 0.05
  done
  te=$(date +%s.%N)
  kill -0 "$pid" 2> /dev/null && { kill -9 "$pid"; cat "$out"; fail "$name: the job still ran 40 s after the signal"; }
  wait "$pid" || rc=$?
  echo "$name: rc=$rc, first sign after $(echo "${td:-$te} - $t0" | bc)s, ended after $(echo "$te - $t0" | bc)s"
  [ $rc -ne 0 ] || fail "$name: exit 0"
  [ "$(echo "$te - $t0 <= 15" | bc)" = 1 ] || fail "$name: took over the watchdog timeout (10 s) + 5 s"
  no_tmp_left
  ! grep -ls '"status":"success"' $(find "$R" -name 'result_*.txt' 2> /dev/null) /dev/null | contains . ||
    fail "$name: a result claims success"
}
signal_fault sigkill_rank1 rank1 KILL
signal_fault sigint_mpirun mpirun INT
signal_fault sigterm_mpirun mpirun TERM

# Full disk: results on a 4 KiB tmpfs (the log outgrows it during init); nothing is left behind.
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=4k tmpfs "$WORK/small" 2>/dev/null; then
  trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
  R=$WORK/small/results
  run 2 --max-steps 3
  umount_later=1
else
  # No mount permission here: the same short writes through a file-size limit (EFBIG).
  echo "faults: tmpfs not mountable; full disk emulated with ulimit -f"
  R=$WORK/small/results
  set +e
  out=$( (ulimit -f 8; trap '' XFSZ; timeout 120 "${MPIRUN[@]}" -np 2 "$BIN" train --data-dir "$DATA" \
        --results-dir "$R" --system t --max-steps 3) 2>&1)
  rc=$?
  set -e
fi
echo "full disk: rc=$rc"
[ $rc -ne 0 ] || fail "a full disk went unnoticed: $out"
echo "$out" | contains -i "cannot write" || fail "no clear error on a full disk: $out"
! ls "$R"/t/resnet/result_*.txt 2>/dev/null | contains . || fail "a truncated result log was kept: $(ls -la "$R"/t/resnet)"
no_tmp_left
echo "faults: ok"
