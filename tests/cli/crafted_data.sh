# A crafted dataset is refused on every rank before anything is written: exit 2, one message that
# names the file and the dataset, nothing under --results-dir. The craft: an eval split whose
# samples have another shape than the training samples' (such a file once overflowed a heap
# buffer during evaluation). Control: the file before crafting passes the same checks.
source "$(dirname "$0")/lib/common.bash" "$@"
ensure_mini_data
CRAFT=$BUILD/tests/craft_eval_shape
[ -x "$CRAFT" ] || fail "$CRAFT not built"

R=$WORK/results
"$BIN" train --benchmark resnet --scale mini --data-dir "$DATA" --results-dir "$R" --print-config > /dev/null ||
  fail "control: the prepared data does not pass the data checks"

mkdir -p "$WORK/data"
cp "$DATA/resnet_mini.h5" "$WORK/data/"
"$CRAFT" "$WORK/data/resnet_mini.h5" 29 28 || fail "could not craft the file"

# --max-steps: were the file accepted, the run would stop after one step, not train for minutes.
set +e
out=$("${MPIRUN[@]}" -np 2 "$BIN" train --benchmark resnet --scale mini --data-dir "$WORK/data" --results-dir "$R" \
  --max-steps 1 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "exit $rc, expected 2: $out"
errors=$(echo "$out" | grep "mlperf-dist: error" || true)
[ "$(echo "$errors" | grep -c .)" -eq 1 ] || fail "expected one error message, got: $out"
echo "$errors" | contains "$WORK/data/resnet_mini.h5" || fail "the file is not named: $errors"
echo "$errors" | contains "/eval/images samples are 29x28x1 but /train/images samples are 28x28x1" ||
  fail "the dataset and shapes are not named: $errors"
[ ! -e "$R" ] || fail "the refused run left files: $(find "$R")"
echo "crafted_data: ok"
