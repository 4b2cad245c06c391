#include "workloads/ssd/ssd_config.h"

#include "mlperf/keys.h"

namespace mlpd {

SsdConfig read_ssd_config(const nlohmann::json& c) {
  SsdConfig r;
  r.model = c.at("model").get<std::string>();
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.max_samples = c.at(keys::kMaxSamples).get<int>();
  r.match_iou_threshold = c.at("match_iou_threshold").get<float>();
  r.neg_pos_ratio = c.at("neg_pos_ratio").get<float>();
  r.nms_iou_threshold = c.at("nms_iou_threshold").get<float>();
  r.score_threshold = c.at("score_threshold").get<float>();
  r.pre_nms_topk = c.at("pre_nms_topk").get<int>();
  r.max_detections = c.at("max_detections").get<int>();
  r.augment_flip = c.at("augment_flip").get<bool>();
  r.bn_momentum = c.at("bn_momentum").get<float>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  return r;
}

}  // namespace mlpd
