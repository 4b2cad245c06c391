// COCO's JSON formats for the evaluator: an instances file (images, categories, annotations with
// bbox, area, iscrowd and a segmentation as polygons or RLE) and a results list ([{image_id,
// category_id, bbox, score[, segmentation]}]), read as pycocotools' COCO and loadRes read them.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "detection/coco_eval.h"

namespace mlpd {

// An annotation's segmentation (polygons, or RLE with string or list counts) as an RLE of the
// image's h x w; std::invalid_argument naming `where` on anything malformed.
Rle coco_segmentation_rle(const nlohmann::json& segmentation, int h, int w, const std::string& where);

// Masks are decoded (polygons rasterized) when with_masks. std::invalid_argument naming the entry
// and field on anything malformed.
CocoGroundTruth coco_read_ground_truth(const nlohmann::json& j, bool with_masks);
// As loadRes: bbox results get area w*h; segm results take their box from the mask (toBbox) and
// their area from it. Segm needs every result's segmentation.
std::vector<CocoDetection> coco_read_detections(const nlohmann::json& j, const CocoGroundTruth& gt, CocoIouType type);

}  // namespace mlpd
