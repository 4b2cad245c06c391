# A missing or corrupt dataset gives a clear error telling the user to run `prepare`, a non-zero
# exit, and no result log.
source "$(dirname "$0")/lib/common.bash" "$@"

set +e
out=$("$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/empty" --results-dir "$WORK/results" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "missing data: exit code 0"
echo "$out" | contains "mlperf-dist prepare" || fail "missing data: no hint to run prepare: $out"

mkdir -p "$WORK/corrupt"
head -c 100000 /dev/urandom > "$WORK/corrupt/resnet_mini.h5"
set +e
out=$("${MPIRUN[@]}" -np 2 "$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/corrupt" --results-dir "$WORK/results" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "corrupt data: exit code 0"
echo "$out" | contains "mlperf-dist prepare" || fail "corrupt data: no hint to run prepare: $out"
echo "$out" | contains "resnet_mini.h5" || fail "corrupt data: path not named: $out"
if find "$WORK/results" -name 'result_*.txt' 2>/dev/null | contains .; then
  # A log may exist (init started) but it must not pass as a result.
  for f in $(find "$WORK/results" -name 'result_*.txt'); do
    if "$BIN" check "$f" > /dev/null; then fail "a failed run left a log that passes check: $f"; fi
  done
fi
echo "missing_data: ok"
