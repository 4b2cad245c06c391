// The ssd workload's hyperparameters, typed: read once from the resolved, rule-checked config.
// (The optimizer and schedule keys are read by train/hyperparams.h, the run keys by train/.)
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mlpd {

struct SsdConfig {
  std::string model;  // ssd_mini or ssd300
  int64_t global_batch = 0;
  int max_samples = 1;                  // random-crop attempts per image (MLPerf's max_samples)
  float match_iou_threshold = 0.5f;     // a prior matches a box at this IoU
  float neg_pos_ratio = 3.0f;           // hard negatives per positive
  float nms_iou_threshold = 0.5f;
  float score_threshold = 0.05f;
  int pre_nms_topk = 200;               // candidates per class before NMS
  int max_detections = 100;             // per image after NMS (COCO's maxDets)
  bool augment_flip = true;
  float bn_momentum = 0.9f;
  uint64_t seed = 0;
};

SsdConfig read_ssd_config(const nlohmann::json& config);

// Box encoding variances (centre, size): fixed by the SSD paper and MLPerf's reference.
inline constexpr float kSsdVarCenter = 0.1f;
inline constexpr float kSsdVarSize = 0.2f;

}  // namespace mlpd
