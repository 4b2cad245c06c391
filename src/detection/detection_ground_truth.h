// The COCO ground truth of a prepared detection split (datasets/README.md's layout), for the
// evaluator: what rank 0 scores the gathered detections against.
#pragma once
#include "detection/coco_eval.h"
#include "detection/detection_data.h"

namespace mlpd {

// Images with their ids and sizes, every instance (crowd ones too, flagged) with its box, class
// (category id = class index 1..K), area and, with masks, its RLE. Categories 1..K.
CocoGroundTruth detection_ground_truth(const DetectionSplit& split, bool with_masks = false);

}  // namespace mlpd
