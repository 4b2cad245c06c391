# `check` on several files never stops at a bad one: a log nested deeper than the parser's stack, a
# binary file, an empty file and a line longer than 1 MiB are each an error for that file, and a
# good log among them is still checked and passes. Exit 1: some log failed.
source "$(dirname "$0")/lib/common.bash" "$@"
TINY=$BUILD/tests/mlperf-dist-tiny
[ -x "$TINY" ] || fail "no $TINY"

"${MPIRUN[@]}" -np 2 "$TINY" train --benchmark tiny --results-dir "$WORK/res" --system t > "$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "tiny did not train"; }
good=$WORK/res/t/tiny/result_0.txt

python3 - "$WORK" <<'PY'
import sys
work = sys.argv[1]
depth = 300000  # enough to overflow the stack of a recursive parser
with open(work + "/deep.txt", "w") as f:
    f.write(':::MLLOG {"namespace": "", "time_ms": 0, "event_type": "POINT_IN_TIME", "key": "x", "metadata": {}, '
            '"value": ' + "[" * depth + "]" * depth + "}\n")
with open(work + "/binary.txt", "wb") as f:
    f.write(bytes(range(256)) * 64 + b":::MLLOG \xff\xfe\x00{{{\n")
open(work + "/empty.txt", "w").close()
with open(work + "/long.txt", "w") as f:
    f.write(":::MLLOG " + "x" * (2 << 20) + "\n")
PY

set +e
"$TINY" check "$WORK/deep.txt" "$WORK/binary.txt" "$good" "$WORK/empty.txt" "$WORK/long.txt" > "$WORK/c.txt" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "exit $rc, expected 1: $(head -c 2000 "$WORK/c.txt")"
grep -q "^$good: .*PASSED" "$WORK/c.txt" || fail "the good log was not checked or did not pass: $(cat "$WORK/c.txt")"
for bad in deep binary empty long; do
  grep -q "^$WORK/$bad.txt: .*FAILED" "$WORK/c.txt" || fail "$bad.txt not reported as FAILED: $(cat "$WORK/c.txt")"
done
grep -q "nested deeper than 32" "$WORK/c.txt" || fail "the nesting is not named"
grep -q "longer than 1048576 bytes" "$WORK/c.txt" || fail "the line length is not named"
echo "check_hostile_logs: ok"
