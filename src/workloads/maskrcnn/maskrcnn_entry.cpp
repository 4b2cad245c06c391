// The maskrcnn workload as the rest of the program sees it: MLPerf v0.7's Mask R-CNN benchmark
// (COCO box mAP 0.377 and mask mAP 0.339 with R-50-FPN) and its mini scale (Fashion-MNIST scenes
// with instance masks), its rules rows, targets and converters.
#include "core/check.h"
#include "detection/detection_data.h"
#include "mlperf/keys.h"
#include "workloads/detection_prepare.h"
#include "workloads/registry.h"

namespace mlpd {

extern const std::string kMaskrcnnMiniDefaults;
extern const std::string kMaskrcnnReferenceDefaults;
std::unique_ptr<Workload> make_maskrcnn_workload(const WorkloadContext& ctx, const nlohmann::json& config);

namespace {

using namespace keys;

constexpr const char* kV07Table = "MLPerf v0.7 tunable hyperparameters (Mask R-CNN)";
constexpr const char* kV07Checker = "MLPerf v0.7 compliance checker, closed_maskrcnn.yaml";
constexpr const char* kOurs = "mlperf-dist: the valid range of the key";

void prepare_maskrcnn(const PrepareRequest& r) { prepare_detection_data(r, kMaskrcnn, 800); }

void check_maskrcnn_data(const WorkloadContext& ctx) {
  check_detection_data(workload_data_path(ctx.data_dir, kMaskrcnn, ctx.scale));
}

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = kMaskrcnn;
  s.summary =
      "instance segmentation: Mask R-CNN R-50-FPN on COCO (reference), a small Mask R-CNN on Fashion-MNIST "
      "scenes (mini), box and mask mAP";
  // MLPerf's {"BBOX": box AP, "SEGM": mask AP}, each with its target; box AP50 beside them.
  s.metric = {"mAP", kEvalAccuracy, "fraction (COCO box and mask AP @[.5:.95])", 0.0, 1.0, true, {"SEGM", "AP50"},
              {"BBOX", "SEGM"}};
  s.scales = {
      {"mini", kMaskrcnnMiniDefaults, 0.58, 20000, 2000,
       "mlperf-dist mini (scenes box mAP 0.58 and mask mAP 0.46, calibrated)", 5, {}, {0.46}},
      {"reference", kMaskrcnnReferenceDefaults, 0.377, 117266, 5000,
       "MLPerf v0.7 Mask R-CNN (COCO 2017 box mAP 0.377, mask mAP 0.339)", 5, {}, {0.339}},
  };
  s.scales[0].rcps = {{32, {5, 5, 5, 5}, "src/workloads/maskrcnn/README.md (4 seeds, 2 ranks)"}};
  s.rules = {
      {"*", "maskrcnn.opt_name_sgd", {kOptName}, RuleKind::OneOf, {}, {kSgd}, {}, true, kV07Table},
      {"*", "maskrcnn.lr_decay_maskrcnn", {kLrDecay}, RuleKind::OneOf, {}, {"maskrcnn"}, {}, true,
       "MLPerf v0.7 Mask R-CNN reference (linear warmup, then decays at steps)"},
      {"*", "maskrcnn.lr_multiple_of_0.02", {kOptBaseLearningRate}, RuleKind::MultipleOf, {0.02}, {}, {}, true,
       kV07Table},
      {"*", "maskrcnn.lr_positive", {kOptBaseLearningRate}, RuleKind::AtLeast, {0.02}, {}, {}, true, kOurs},
      {"*", "maskrcnn.decay_factor_0.1", {kOptLearningRateDecayFactor}, RuleKind::Equals, {0.1}, {}, {}, true,
       kV07Table},
      {"*", "maskrcnn.two_decay_steps", {kOptLearningRateDecaySteps}, RuleKind::ElementsMultipleOf, {1, 1}, {}, {},
       true, kV07Table},
      {"*", "maskrcnn.candidates_multiple_of_1000", {kNumImageCandidates}, RuleKind::MultipleOf, {1000}, {}, {}, true,
       kV07Table},
      {"*", "maskrcnn.candidates_at_least_1000", {kNumImageCandidates}, RuleKind::AtLeast, {1000}, {}, {}, true,
       kV07Table},
      {"*", "maskrcnn.warmup_steps_at_least_0", {kOptLearningRateWarmupSteps}, RuleKind::AtLeast, {0}, {}, {}, true,
       kV07Checker},
      {"*", "maskrcnn.warmup_factor_positive", {kOptLearningRateWarmupFactor}, RuleKind::AtLeast, {1e-9}, {}, {},
       true, kV07Checker},
      {"*", "maskrcnn.warmup_factor_0_to_1", {kOptLearningRateWarmupFactor}, RuleKind::AtMost, {1}, {}, {}, true,
       kOurs},
      {"*", "maskrcnn.momentum_0_to_1", {kOptMomentum}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "maskrcnn.momentum_0_to_1", {kOptMomentum}, RuleKind::AtMost, {0.999}, {}, {}, false, kOurs},
      {"*", "maskrcnn.model_mini_or_r50", {"model"}, RuleKind::OneOf, {}, {"maskrcnn_mini", "maskrcnn_r50"}, {},
       false, kOurs},
      {"*", "maskrcnn.rpn_batch_at_least_2", {"rpn_batch_size_per_image"}, RuleKind::AtLeast, {2}, {}, {}, false,
       kOurs},
      {"*", "maskrcnn.rpn_topk_at_least_1", {"rpn_pre_nms_topk_train"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.rpn_topk_at_least_1", {"rpn_pre_nms_topk_test"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.rpn_topk_at_least_1", {"rpn_post_nms_topk_test"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.nms_iou_0_to_1", {"rpn_nms_iou_threshold"}, RuleKind::AtLeast, {0.01}, {}, {}, false, kOurs},
      {"*", "maskrcnn.nms_iou_0_to_1", {"rpn_nms_iou_threshold"}, RuleKind::AtMost, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.nms_iou_0_to_1", {"nms_iou_threshold"}, RuleKind::AtLeast, {0.01}, {}, {}, false, kOurs},
      {"*", "maskrcnn.nms_iou_0_to_1", {"nms_iou_threshold"}, RuleKind::AtMost, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.roi_batch_at_least_1", {"roi_batch_size_per_image"}, RuleKind::AtLeast, {1}, {}, {}, false,
       kOurs},
      {"*", "maskrcnn.roi_positive_fraction_0_to_1", {"roi_positive_fraction"}, RuleKind::AtLeast, {0}, {}, {},
       false, kOurs},
      {"*", "maskrcnn.roi_positive_fraction_0_to_1", {"roi_positive_fraction"}, RuleKind::AtMost, {1}, {}, {}, false,
       kOurs},
      {"*", "maskrcnn.score_threshold_0_to_1", {"score_threshold"}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "maskrcnn.score_threshold_0_to_1", {"score_threshold"}, RuleKind::AtMost, {0.99}, {}, {}, false, kOurs},
      {"*", "maskrcnn.max_detections_1_to_1000", {"max_detections"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.max_detections_1_to_1000", {"max_detections"}, RuleKind::AtMost, {1000}, {}, {}, false, kOurs},
      {"*", "maskrcnn.bn_momentum_0_to_1", {"bn_momentum"}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "maskrcnn.bn_momentum_0_to_1", {"bn_momentum"}, RuleKind::AtMost, {1}, {}, {}, false, kOurs},
      {"*", "maskrcnn.model_bn_span_divides_local_batch", {kModelBnSpan}, RuleKind::DividesLocalBatch, {},
       {kGlobalBatchSize}, {}, false,
       "MLPerf v0.7 model_bn_span: batch-norm groups of equal size within each rank's batch"},
  };
  s.closed_log_keys = {{kSgd,
                        {kOptLearningRateWarmupFactor, kOptLearningRateWarmupSteps, kOptLearningRateDecaySteps,
                         kOptLearningRateDecayFactor, kOptBaseLearningRate, kNumImageCandidates, kMinImageSize,
                         kMaxImageSize}}};
  e.prepare_help =
      "mini: the Fashion-MNIST IDX directory the scenes are composed from (default "
      "/usr/share/datasets/fashion-mnist, Debian package dataset-fashion-mnist); reference: the COCO 2017 directory "
      "(or --coco DIR; --image-size, default 800)";
  e.prepare = &prepare_maskrcnn;
  e.check_data = &check_maskrcnn_data;
  e.make = &make_maskrcnn_workload;
  return e;
}

}  // namespace

const WorkloadEntry& maskrcnn_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
