// The COCO evaluator (src/detection/coco_eval.h) against hand-computed cases and against
// pycocotools 2.0.x on a small random set with boxes, masks, crowd regions and a missing class.
// The random set and its expected values come from a Python script run once:
//   random.seed(7); 5 images of 48x64, categories {1, 2, 5}; 1-4 rectangles per image (a notch cut
//   from the top-left third so masks differ from boxes, 12% crowd), 0-3 jittered detections each
//   (80% the right class), one false positive per image; then
//   COCOeval(COCO(gt), COCO.loadRes(dt), t).evaluate(); .accumulate(); .summarize(); e.stats
// for t in bbox and segm. The JSON below is that script's gt.json and dt.json, verbatim.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "detection/coco_eval.h"
#include "detection/coco_json.h"

using namespace mlpd;

namespace {

const char* kGroundTruth = R"json({"images": [{"id": 1, "height": 48, "width": 64}, {"id": 2, "height": 48, "width": 64}, {"id": 3, "height": 48, "width": 64}, {"id": 4, "height": 48, "width": 64}, {"id": 5, "height": 48, "width": 64}], "categories": [{"id": 1, "name": "c1"}, {"id": 2, "name": "c2"}, {"id": 5, "name": "c5"}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [41, 3, 12, 15], "area": 160.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "hm1:V100000K500000000000000]`0"}}, {"id": 2, "image_id": 1, "category_id": 1, "bbox": [3, 16, 26, 21], "area": 490.0, "iscrowd": 1, "segmentation": {"size": [48, 64], "counts": "W5>R10000000000000I70000000000000000000000000000000000Pd1"}}, {"id": 3, "image_id": 1, "category_id": 1, "bbox": [21, 5, 38, 29], "area": 994.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "no0d0l0000000000000000000000G900000000000000000000000000000000000000000000000000[7"}}, {"id": 4, "image_id": 2, "category_id": 2, "bbox": [37, 29, 23, 17], "area": 356.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "bh1<T100000000000K5000000000000000000000000000000S5"}}, {"id": 5, "image_id": 2, "category_id": 5, "bbox": [4, 3, 21, 22], "area": 413.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "Z6?Q100000000000I700000000000000000000000000]j1"}}, {"id": 6, "image_id": 2, "category_id": 1, "bbox": [44, 21, 20, 18], "area": 324.0, "iscrowd": 1, "segmentation": {"size": [48, 64], "counts": "kR2<T1000000000J600000000000000000000000000[O"}}, {"id": 7, "image_id": 2, "category_id": 1, "bbox": [31, 5, 28, 15], "area": 375.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "j^1:V1000000000000000K5000000000000000000000000000000000000[7"}}, {"id": 8, "image_id": 3, "category_id": 1, "bbox": [8, 18, 40, 8], "area": 294.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "d<6Z100000000000000000000000N20000000000000000000000000000000000000000000000000000^g0"}}, {"id": 9, "image_id": 3, "category_id": 2, "bbox": [4, 13, 6, 9], "area": 48.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "`66Z10M3000000c`2"}}, {"id": 10, "image_id": 3, "category_id": 2, "bbox": [7, 3, 26, 18], "area": 420.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "i:<T10000000000000J60000000000000000000000000000000000]^1"}}, {"id": 11, "image_id": 3, "category_id": 1, "bbox": [23, 29, 19, 19], "area": 325.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "cS1=S1000000000J6000000000000000000000000SP1"}}, {"id": 12, "image_id": 4, "category_id": 5, "bbox": [14, 6, 28, 26], "area": 656.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "^e0b0n0000000000000000H8000000000000000000000000000000000000jP1"}}, {"id": 13, "image_id": 4, "category_id": 2, "bbox": [17, 15, 4, 28], "area": 103.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "Xj0c0d090000QP2"}}, {"id": 14, "image_id": 5, "category_id": 2, "bbox": [42, 3, 8, 29], "area": 214.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "\\o1d0l00G90000000000md0"}}, {"id": 15, "image_id": 5, "category_id": 1, "bbox": [5, 10, 32, 15], "area": 430.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "o7:V100000000000000000K5000000000000000000000000000000000000000000VX1"}}, {"id": 16, "image_id": 5, "category_id": 5, "bbox": [29, 25, 12, 21], "area": 224.0, "iscrowd": 0, "segmentation": {"size": [48, 64], "counts": "`\\1>R100000I700000000000000gQ1"}}]})json";
const char* kResults = R"json([{"image_id": 1, "category_id": 1, "bbox": [5, 13, 24, 17], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "m7a0o0000000000000000000000000000000000000000000000Sd1"}}, {"image_id": 1, "category_id": 1, "bbox": [2, 12, 30, 25], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "\\3i0g0000000000000000000000000000000000000000000000000000000000d_1"}}, {"image_id": 1, "category_id": 1, "bbox": [7, 14, 25, 22], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "n:f0j000000000000000000000000000000000000000000000000b_1"}}, {"image_id": 1, "category_id": 1, "bbox": [22, 2, 41, 25], "score": 0.619, "segmentation": {"size": [48, 64], "counts": "RQ1i0g00000000000000000000000000000000000000000000000000000000000000000000000000000000^1"}}, {"image_id": 1, "category_id": 2, "bbox": [1, 1, 5, 5], "score": 0.3, "segmentation": {"size": [48, 64], "counts": "a15[10000000of2"}}, {"image_id": 2, "category_id": 2, "bbox": [36, 26, 27, 16], "score": 0.875, "segmentation": {"size": [48, 64], "counts": "jf1`0P1000000000000000000000000000000000000000000000000000f0"}}, {"image_id": 2, "category_id": 1, "bbox": [2, 6, 22, 17], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "V3a0o000000000000000000000000000000000000000000jk1"}}, {"image_id": 2, "category_id": 5, "bbox": [5, 4, 25, 24], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "d7h0h000000000000000000000000000000000000000000000000lb1"}}, {"image_id": 2, "category_id": 1, "bbox": [43, 21, 21, 23], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "UQ2g0i0000000000000000000000000000000000000000[O"}}, {"image_id": 2, "category_id": 1, "bbox": [42, 18, 22, 13], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "bo1=S100000000000000000000000000000000000000000^O"}}, {"image_id": 2, "category_id": 1, "bbox": [29, 7, 31, 14], "score": 0.986, "segmentation": {"size": [48, 64], "counts": "g[1>R100000000000000000000000000000000000000000000000000000000000i5"}}, {"image_id": 2, "category_id": 1, "bbox": [30, 3, 24, 12], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "S]1<T1000000000000000000000000000000000000000000000m>"}}, {"image_id": 2, "category_id": 2, "bbox": [1, 1, 5, 5], "score": 0.3, "segmentation": {"size": [48, 64], "counts": "a15[10000000of2"}}, {"image_id": 3, "category_id": 1, "bbox": [9, 16, 43, 12], "score": 0.74, "segmentation": {"size": [48, 64], "counts": "P><T100000000000000000000000000000000000000000000000000000000000000000000000000000000000`a0"}}, {"image_id": 3, "category_id": 1, "bbox": [12, 20, 41, 9], "score": 0.482, "segmentation": {"size": [48, 64], "counts": "db09W10000000000000000000000000000000000000000000000000000000000000000000000000000000l?"}}, {"image_id": 3, "category_id": 2, "bbox": [0, 10, 1, 13], "score": 0.5, "segmentation": {"size": [48, 64], "counts": ":=Yo2"}}, {"image_id": 3, "category_id": 2, "bbox": [0, 10, 4, 13], "score": 0.5, "segmentation": {"size": [48, 64], "counts": ":=S100000fi2"}}, {"image_id": 3, "category_id": 2, "bbox": [10, 6, 25, 14], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "V?>R100000000000000000000000000000000000000000000000Z[1"}}, {"image_id": 3, "category_id": 2, "bbox": [10, 1, 29, 13], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "Q?=S10000000000000000000000000000000000000000000000000000000_U1"}}, {"image_id": 3, "category_id": 2, "bbox": [5, 7, 21, 21], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "g7e0k0000000000000000000000000000000000000000ih1"}}, {"image_id": 3, "category_id": 1, "bbox": [27, 29, 22, 19], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "]Y1c0m000000000000000000000000000000000000000000ce0"}}, {"image_id": 3, "category_id": 2, "bbox": [1, 1, 5, 5], "score": 0.3, "segmentation": {"size": [48, 64], "counts": "a15[10000000of2"}}, {"image_id": 4, "category_id": 2, "bbox": [20, 16, 4, 24], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "`n0h0h000000`k1"}}, {"image_id": 4, "category_id": 5, "bbox": [18, 14, 6, 32], "score": 0.84, "segmentation": {"size": [48, 64], "counts": "^k0P1`0000000000bk1"}}, {"image_id": 4, "category_id": 2, "bbox": [1, 1, 5, 5], "score": 0.3, "segmentation": {"size": [48, 64], "counts": "a15[10000000of2"}}, {"image_id": 5, "category_id": 2, "bbox": [45, 1, 9, 34], "score": 0.801, "segmentation": {"size": [48, 64], "counts": "aS2R1>000000000000000o>"}}, {"image_id": 5, "category_id": 5, "bbox": [30, 23, 15, 24], "score": 0.9, "segmentation": {"size": [48, 64], "counts": "g]1h0h0000000000000000000000000000ik0"}}, {"image_id": 5, "category_id": 1, "bbox": [33, 23, 13, 19], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "Wb1c0m000000000000000000000000Yj0"}}, {"image_id": 5, "category_id": 5, "bbox": [29, 23, 10, 25], "score": 0.5, "segmentation": {"size": [48, 64], "counts": "W\\1i0g000000000000000000iT1"}}, {"image_id": 5, "category_id": 2, "bbox": [1, 1, 5, 5], "score": 0.3, "segmentation": {"size": [48, 64], "counts": "a15[10000000of2"}}])json";

CocoGroundTruth one_image_gt(std::vector<std::vector<double>> boxes, std::vector<bool> crowd = {}) {
  CocoGroundTruth gt;
  gt.images = {{1, 100, 100}};
  gt.category_ids = {1, 2};
  for (size_t i = 0; i < boxes.size(); ++i) {
    CocoAnnotation a;
    a.id = int64_t(i) + 1;
    a.image_id = 1;
    a.category_id = 1;
    for (int k = 0; k < 4; ++k) a.bbox[k] = boxes[i][size_t(k)];
    a.area = boxes[i][2] * boxes[i][3];
    a.iscrowd = i < crowd.size() && crowd[i];
    gt.annotations.push_back(a);
  }
  return gt;
}

CocoDetection det(std::vector<double> box, double score, int32_t cat = 1) {
  CocoDetection d;
  d.image_id = 1;
  d.category_id = cat;
  for (int k = 0; k < 4; ++k) d.bbox[k] = box[size_t(k)];
  d.score = score;
  return d;
}

}  // namespace

TEST(CocoEval, PerfectDetectionsScoreOne) {
  const CocoGroundTruth gt = one_image_gt({{10, 10, 20, 20}, {50, 50, 40, 40}});
  const CocoStats s = coco_evaluate(gt, {det({10, 10, 20, 20}, 0.9), det({50, 50, 40, 40}, 0.8)}, CocoIouType::Bbox);
  EXPECT_DOUBLE_EQ(s.stats[0], 1.0);
  EXPECT_DOUBLE_EQ(s.stats[1], 1.0);
  EXPECT_DOUBLE_EQ(s.stats[8], 1.0);
  // Category 2 has neither ground truth nor detections: left out of every mean, not a zero.
  EXPECT_DOUBLE_EQ(s.stats[3], 1.0);  // 20x20 is small (< 32^2)
  EXPECT_DOUBLE_EQ(s.stats[4], 1.0);  // 40x40 is medium
  EXPECT_DOUBLE_EQ(s.stats[5], -1.0);  // no large object
  EXPECT_DOUBLE_EQ(s.stats[6], 0.5);   // one detection per image finds one of two objects
}

TEST(CocoEval, AHigherScoredFalsePositiveHalvesThePrecisionAtItsRecall) {
  const CocoGroundTruth gt = one_image_gt({{10, 10, 20, 20}});
  // Ranked: the false positive, then the hit: precision 1/2 at recall 1, for every threshold.
  const CocoStats s = coco_evaluate(gt, {det({60, 60, 10, 10}, 0.9), det({10, 10, 20, 20}, 0.5)}, CocoIouType::Bbox);
  EXPECT_NEAR(s.stats[0], 0.5, 1e-12);
  EXPECT_NEAR(s.stats[6], 0.0, 1e-12);  // maxDets 1 keeps only the false positive
  EXPECT_NEAR(s.stats[7], 1.0, 1e-12);
}

TEST(CocoEval, ADuplicateIsAFalsePositive) {
  const CocoGroundTruth gt = one_image_gt({{10, 10, 20, 20}});
  const CocoStats s = coco_evaluate(gt, {det({10, 10, 20, 20}, 0.9), det({10, 10, 20, 20}, 0.8)}, CocoIouType::Bbox);
  EXPECT_NEAR(s.stats[0], 1.0, 1e-12);  // the duplicate ranks after full recall: no precision lost
  const CocoStats t = coco_evaluate(gt, {det({10, 10, 20, 20}, 0.8), det({11, 10, 20, 20}, 0.9)}, CocoIouType::Bbox);
  // The shifted box (IoU 19/21 = 0.905) matches first up to IoU 0.90; at 0.95 only the exact one.
  EXPECT_NEAR(t.stats[2], 1.0, 1e-12);
  EXPECT_LT(t.stats[0], 1.0);
}

TEST(CocoEval, CrowdRegionsAbsorbDetectionsWithoutCounting) {
  // A crowd region and one object; a detection inside the crowd region is ignored (not a false
  // positive), and the crowd region is never a miss.
  const CocoGroundTruth gt = one_image_gt({{0, 0, 50, 50}, {70, 70, 20, 20}}, {true, false});
  const CocoStats s =
      coco_evaluate(gt, {det({5, 5, 10, 10}, 0.95), det({70, 70, 20, 20}, 0.9)}, CocoIouType::Bbox);
  EXPECT_NEAR(s.stats[0], 1.0, 1e-12);
}

TEST(CocoEval, NoDetectionsScoreZeroAndUnknownImagesAreRejected) {
  const CocoGroundTruth gt = one_image_gt({{10, 10, 20, 20}});
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, {}, CocoIouType::Bbox).stats[0], 0.0);
  CocoDetection d = det({0, 0, 1, 1}, 0.5);
  d.image_id = 7;
  EXPECT_THROW(coco_evaluate(gt, {d}, CocoIouType::Bbox), std::invalid_argument);
}

TEST(CocoEval, MatchesPycocotoolsOnARandomSetForBoxesAndMasks) {
  const auto gt_json = nlohmann::json::parse(kGroundTruth);
  const auto dt_json = nlohmann::json::parse(kResults);
  const std::vector<double> want_bbox = {0.153025302530253, 0.4532453245324532, 0.0, 0.153025302530253, -1.0, -1.0, 0.13, 0.2, 0.2, 0.2, -1.0, -1.0};
  const std::vector<double> want_segm = {0.11655665566556654, 0.4532453245324532, 0.0, 0.11711771177117712, -1.0, -1.0, 0.10111111111111111, 0.15555555555555553, 0.15555555555555553, 0.15555555555555553, -1.0, -1.0};
  for (CocoIouType type : {CocoIouType::Bbox, CocoIouType::Segm}) {
    const bool segm = type == CocoIouType::Segm;
    const CocoGroundTruth gt = coco_read_ground_truth(gt_json, segm);
    const CocoStats s = coco_evaluate(gt, coco_read_detections(dt_json, gt, type), type);
    const std::vector<double>& want = segm ? want_segm : want_bbox;
    for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(s.stats[i], want[i], 1e-12) << (segm ? "segm" : "bbox") << " stat " << i;
  }
}

TEST(CocoEval, SummaryTextIsPycocotoolsFormat) {
  CocoStats s;
  s.stats = {0.5, 0.75, 0.25, -1, 0.125, 1, 0, 0.1, 0.2, 0.3, 0.4, 0.5};
  const std::string text = coco_summary_text(s);
  EXPECT_NE(text.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.500\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = -1.000\n"),
            std::string::npos);
  EXPECT_NE(text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.000\n"),
            std::string::npos);
  EXPECT_NE(text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 0.400\n"),
            std::string::npos);
}

TEST(CocoJson, MalformedEntriesNameTheirPlace) {
  auto gt = nlohmann::json::parse(kGroundTruth);
  gt["annotations"][3].erase("bbox");
  try {
    coco_read_ground_truth(gt, false);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("annotations[3]"), std::string::npos) << e.what();
  }
  const CocoGroundTruth ok = coco_read_ground_truth(nlohmann::json::parse(kGroundTruth), false);
  auto dt = nlohmann::json::parse(kResults);
  dt[2]["bbox"] = {1, 2, 3};
  EXPECT_THROW(coco_read_detections(dt, ok, CocoIouType::Bbox), std::invalid_argument);
  dt = nlohmann::json::parse(kResults);
  dt[0]["image_id"] = 999;
  EXPECT_THROW(coco_read_detections(dt, ok, CocoIouType::Bbox), std::invalid_argument);
}
