// The maskrcnn workload's hyperparameters, typed: read once from the resolved, rule-checked config.
// (The optimizer and schedule keys are read by train/hyperparams.h, the run keys by train/.)
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mlpd {

struct MaskRcnnConfig {
  std::string model;  // maskrcnn_mini
  int64_t global_batch = 0;
  int rpn_batch = 256;                // anchors sampled per image for the RPN loss
  int rpn_pre_nms_topk_train = 1000;  // anchors decoded per image before the proposals' NMS
  int num_image_candidates = 1000;    // proposals kept per training image after NMS (MLPerf's key)
  int rpn_pre_nms_topk_test = 600;
  int rpn_post_nms_topk_test = 100;   // proposals per eval image through the box head
  float rpn_nms_iou = 0.7f;
  int rois_per_image = 64;            // RoIs sampled per training image for the heads
  float roi_positive_fraction = 0.25f;
  float score_threshold = 0.05f;
  float nms_iou_threshold = 0.5f;
  int max_detections = 100;           // per image (COCO's maxDets)
  bool augment_flip = true;
  float bn_momentum = 0.9f;
  uint64_t seed = 0;
};

MaskRcnnConfig read_maskrcnn_config(const nlohmann::json& config);

}  // namespace mlpd
