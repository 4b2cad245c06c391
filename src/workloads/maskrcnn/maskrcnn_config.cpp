#include "workloads/maskrcnn/maskrcnn_config.h"

#include "mlperf/keys.h"

namespace mlpd {

MaskRcnnConfig read_maskrcnn_config(const nlohmann::json& c) {
  MaskRcnnConfig r;
  r.model = c.at("model").get<std::string>();
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.rpn_batch = c.at("rpn_batch_size_per_image").get<int>();
  r.rpn_pre_nms_topk_train = c.at("rpn_pre_nms_topk_train").get<int>();
  r.num_image_candidates = c.at(keys::kNumImageCandidates).get<int>();
  r.rpn_pre_nms_topk_test = c.at("rpn_pre_nms_topk_test").get<int>();
  r.rpn_post_nms_topk_test = c.at("rpn_post_nms_topk_test").get<int>();
  r.rpn_nms_iou = c.at("rpn_nms_iou_threshold").get<float>();
  r.rois_per_image = c.at("roi_batch_size_per_image").get<int>();
  r.roi_positive_fraction = c.at("roi_positive_fraction").get<float>();
  r.score_threshold = c.at("score_threshold").get<float>();
  r.nms_iou_threshold = c.at("nms_iou_threshold").get<float>();
  r.max_detections = c.at("max_detections").get<int>();
  r.augment_flip = c.at("augment_flip").get<bool>();
  r.bn_momentum = c.at("bn_momentum").get<float>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  return r;
}

}  // namespace mlpd
