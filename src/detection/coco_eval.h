// COCO detection metrics exactly as pycocotools' COCOeval computes them (evaluate, accumulate,
// summarize; useCats=1): IoU thresholds .50:.05:.95, 101 recall points with the precision
// envelope, maxDets 1/10/100, area ranges all/small/medium/large, crowd regions (IoU over the
// detection's area, matched without being used up, ignored), detections ranked by score with ties
// in input order (numpy's stable mergesort). Boxes are COCO's [x, y, w, h] in pixels.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "detection/rle.h"

namespace mlpd {

struct CocoImage {
  int64_t id = 0;
  int height = 0, width = 0;
};

struct CocoAnnotation {  // ground truth
  int64_t id = 0, image_id = 0;  // ids > 0, as COCO's (0 marks "unmatched" inside the evaluator)
  int32_t category_id = 0;
  double bbox[4] = {0, 0, 0, 0};
  double area = 0.0;
  bool iscrowd = false;  // pycocotools also ignores every crowd annotation
  bool has_mask = false;
  Rle mask;
};

struct CocoDetection {
  int64_t image_id = 0;
  int32_t category_id = 0;
  double bbox[4] = {0, 0, 0, 0};
  double score = 0.0;
  bool has_mask = false;
  Rle mask;
};

enum class CocoIouType { Bbox, Segm };

struct CocoGroundTruth {
  std::vector<CocoImage> images;
  std::vector<CocoAnnotation> annotations;
  std::vector<int32_t> category_ids;
};

// AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl; -1 where nothing is scored.
struct CocoStats {
  std::array<double, 12> stats{};
};

// Throws std::invalid_argument for a detection on an image the ground truth does not have (as
// pycocotools' loadRes asserts), or a segm evaluation without masks.
CocoStats coco_evaluate(const CocoGroundTruth& gt, const std::vector<CocoDetection>& dts, CocoIouType type);
// The twelve lines of pycocotools' summarize().
std::string coco_summary_text(const CocoStats& s);

}  // namespace mlpd
