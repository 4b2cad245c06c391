# maskrcnn at the reference scale end to end on a tiny COCO-format set (tests/detection/tiny_coco.h,
# two annotated train images and one val image): `prepare --coco` at 64x64, then `train --scale
# reference` (MLPerf's R-50-FPN, with the set's two categories) for two steps of a batch of two (an
# epoch each), stopped by --max-steps, evaluating the val image after each; the log carries bbox and
# segm AP as MLPerf's {"BBOX": x, "SEGM": y}. The RoI sampling is reduced (64 a image) to keep CI short; the
# rest is the reference config. An input size that the FPN cannot halve down to P5 is refused.
source "$(dirname "$0")/lib/common.bash" "$@"
WRITE=$BUILD/tests/write_tiny_coco
[ -x "$WRITE" ] || fail "$WRITE not built"
"$WRITE" "$WORK/coco" || fail "could not write the tiny COCO set"
"$BIN" prepare --benchmark maskrcnn --scale reference --coco "$WORK/coco" --image-size 64 --data-dir "$WORK/data" \
  > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare --coco failed"; }
args=(train --benchmark maskrcnn --scale reference --data-dir "$WORK/data" --results-dir "$WORK/res" --system ci
      --set global_batch_size=2 --set roi_batch_size_per_image=64 --max-steps 2 --progress-seconds 0)
"$BIN" "${args[@]}" > "$WORK/train.txt" 2>&1 && { cat "$WORK/train.txt"; fail "a --max-steps run reported success"; }
rc=$?
[ $rc -eq 3 ] || { tail -30 "$WORK/train.txt"; fail "exit $rc, expected 3 (stopped by --max-steps)"; }
grep -q "^status: aborted" "$WORK/train.txt" || { tail -30 "$WORK/train.txt"; fail "status is not aborted"; }
grep -q "maskrcnn_r50: .*backbone + FPN.*5 levels" "$WORK/train.txt" || { grep -i "maskrcnn_r50" "$WORK/train.txt"; fail "not the R-50-FPN model"; }
grep -E "^epoch 1 step [12]/|^eval epoch" "$WORK/train.txt"
log=$(sed -n 's/^result log: //p' "$WORK/train.txt" | tail -1)
[ -f "$log" ] || fail "no result log"
grep -qE '"key":"eval_accuracy","value":\{"BBOX":[0-9.e-]+,"SEGM":[0-9.e-]+\}' "$log" || fail "no two-part eval_accuracy"
# 80x80 does not halve exactly (P2 20, P3 10, P4 5, P5 3): refused before training.
"$BIN" prepare --benchmark maskrcnn --scale reference --coco "$WORK/coco" --image-size 80 --data-dir "$WORK/d96" \
  > /dev/null 2>&1 || fail "prepare at 80 failed"
"$BIN" train --benchmark maskrcnn --scale reference --data-dir "$WORK/d96" --results-dir "$WORK/r96" --max-steps 1 \
  --set global_batch_size=2 \
  > "$WORK/t96.txt" 2>&1 && fail "80x80 input accepted"
grep -q "multiple of the coarsest stride" "$WORK/t96.txt" || { cat "$WORK/t96.txt"; fail "no clear error for 80x80"; }
echo "maskrcnn_reference_step: ok"
