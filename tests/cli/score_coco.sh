# `score coco` prints exactly pycocotools' summarize() lines, for boxes and masks, on sets this test
# writes: a random set (30 images of 80x120, 4 categories one of which never appears, rectangles
# and polygon masks, 8% crowd, a few hundred jittered, duplicated and false detections with RLE
# masks; fixed seed), and a set with polygon ground truth; each compared with pycocotools run here
# on the same files (all twelve numbers to 3 decimals, as printed). Then the usage errors: exit 2
# and a message naming the file, entry and field.
source "$(dirname "$0")/lib/common.bash" "$@"
PY=${PYTHON:-python3}
"$PY" -c 'import pycocotools.cocoeval' 2> /dev/null ||
  fail "pycocotools is not installed for $PY: run launch/install-deps, or: $PY -m pip install pycocotools"

"$PY" - "$WORK" <<'PY'
import json, random, sys
import numpy as np
from pycocotools import mask as mu
work = sys.argv[1]
r = random.Random(2024)
H, W = 80, 120
images = [{"id": 100 + i, "height": H, "width": W} for i in range(30)]
cats = [{"id": c, "name": f"c{c}"} for c in (1, 3, 4, 9)]  # 9 never appears
anns, dts = [], []
def rect(x, y, w, h):
    m = np.zeros((H, W), dtype=np.uint8, order="F"); m[y:y + h, x:x + w] = 1; return m
for im in images:
    for _ in range(r.randint(0, 6)):
        w, h = r.randint(2, 70), r.randint(2, 60)
        x, y = r.randint(0, W - w), r.randint(0, H - h)
        c = r.choice((1, 3, 4))
        if r.random() < 0.5:
            poly = [x, y, x + w, y, x + w * 0.6, y + h, x, y + h * 0.7]
            rle = mu.merge(mu.frPyObjects([poly], H, W)); seg = [poly]
        else:
            rle = mu.encode(rect(x, y, w, h)); seg = {"size": [H, W], "counts": rle["counts"].decode()}
        anns.append({"id": len(anns) + 1, "image_id": im["id"], "category_id": c, "bbox": [x, y, w, h],
                     "area": float(mu.area(rle)), "iscrowd": 1 if r.random() < 0.08 else 0, "segmentation": seg})
        for _ in range(r.randint(0, 4)):
            ww, hh = max(1, w + r.randint(-8, 8)), max(1, h + r.randint(-8, 8))
            xx, yy = min(max(0, x + r.randint(-6, 6)), W - ww), min(max(0, y + r.randint(-6, 6)), H - hh)
            m = mu.encode(rect(xx, yy, ww, hh))
            dts.append({"image_id": im["id"], "category_id": c if r.random() < 0.85 else r.choice((1, 3, 4)),
                        "bbox": [xx, yy, ww, hh], "score": round(r.choice([r.random(), 0.5, 0.75]), 2),
                        "segmentation": {"size": [H, W], "counts": m["counts"].decode()}})
    for _ in range(r.randint(0, 3)):  # false positives
        ww, hh = r.randint(3, 30), r.randint(3, 30)
        xx, yy = r.randint(0, W - ww), r.randint(0, H - hh)
        m = mu.encode(rect(xx, yy, ww, hh))
        dts.append({"image_id": im["id"], "category_id": r.choice((1, 3, 4)), "bbox": [xx, yy, ww, hh],
                    "score": round(r.random(), 3), "segmentation": {"size": [H, W], "counts": m["counts"].decode()}})
json.dump({"images": images, "categories": cats, "annotations": anns}, open(f"{work}/gt.json", "w"))
json.dump(dts, open(f"{work}/dt.json", "w"))
print(f"score_coco: {len(anns)} annotations, {len(dts)} detections")
PY

pycoco() {  # pycoco IOU_TYPE: pycocotools' summarize() lines on the test's files
  "$PY" - "$WORK" "$1" <<'PY'
import contextlib, io, sys
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
work, t = sys.argv[1], sys.argv[2]
with contextlib.redirect_stdout(io.StringIO()):
    gt = COCO(f"{work}/gt.json"); dt = gt.loadRes(f"{work}/dt.json")
    e = COCOeval(gt, dt, t); e.evaluate(); e.accumulate()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    e.summarize()
sys.stdout.write(out.getvalue())
PY
}

for t in bbox segm; do
  ours=$("$BIN" score coco --gt "$WORK/gt.json" --dt "$WORK/dt.json" --iou-type $t --json "$WORK/$t.json") ||
    fail "score coco $t: exit $?"
  theirs=$(pycoco $t)
  [ -n "$theirs" ] || fail "pycocotools printed nothing for $t"
  if [ "$ours" != "$theirs" ]; then
    diff <(echo "$ours") <(echo "$theirs") || true
    fail "$t: ours differs from pycocotools"
  fi
  echo "$ours" | head -1 | sed "s/^/  $t: /"
  python3 -c "import json,sys; j=json.load(open('$WORK/$t.json')); assert len(j)==13 and j['iou_type']=='$t', j" ||
    fail "--json $t: not the twelve numbers"
done

# Usage errors: exit 2 and a message naming what is wrong.
expect_usage_error() {  # expect_usage_error PATTERN ARGS...
  local pattern=$1; shift
  set +e
  "$BIN" score coco "$@" > "$WORK/err.txt" 2>&1
  local rc=$?
  set -e
  [ $rc -eq 2 ] || { cat "$WORK/err.txt"; fail "score coco $*: exit $rc, expected 2"; }
  grep -q -- "$pattern" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "score coco $*: no '$pattern' in the message"; }
}
echo '{"images": [], "categories": []' > "$WORK/broken.json"
expect_usage_error "not valid JSON" --gt "$WORK/broken.json" --dt "$WORK/dt.json"
python3 -c "import json; d=json.load(open('$WORK/dt.json')); d[5]['bbox']=[1,2]; json.dump(d, open('$WORK/bad_dt.json','w'))"
expect_usage_error "results\[5\].bbox" --gt "$WORK/gt.json" --dt "$WORK/bad_dt.json"
python3 -c "import json; d=json.load(open('$WORK/dt.json')); d[0]['image_id']=7; json.dump(d, open('$WORK/bad_img.json','w'))"
expect_usage_error "not an image of the ground truth" --gt "$WORK/gt.json" --dt "$WORK/bad_img.json"
python3 -c "import json; g=json.load(open('$WORK/gt.json')); del g['annotations'][2]['area']; json.dump(g, open('$WORK/bad_gt.json','w'))"
expect_usage_error "annotations\[2\]" --gt "$WORK/bad_gt.json" --dt "$WORK/dt.json"
expect_usage_error "" --gt "$WORK/missing.json" --dt "$WORK/dt.json"
echo "score_coco: ok"
