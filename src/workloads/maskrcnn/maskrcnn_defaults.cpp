// The maskrcnn workload's embedded defaults: every tunable key, with MLPerf's own names where one
// exists. A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kMaskrcnnMiniDefaults;
extern const std::string kMaskrcnnReferenceDefaults;

const std::string kMaskrcnnMiniDefaults = R"(# maskrcnn, mini scale: a small Mask R-CNN on 96x96 Fashion-MNIST scenes (semi-synthetic)
model: maskrcnn_mini
global_batch_size: 32
model_bn_span: 0                 # samples per batch-norm group; 0 = the per-rank batch
opt_name: sgd
opt_base_learning_rate: 0.04     # a multiple of 0.02 (MLPerf)
opt_momentum: 0.9
opt_weight_decay: 0.0001
lr_decay: maskrcnn               # MLPerf Mask R-CNN: linear warmup from a factor, decays at steps
opt_learning_rate_warmup_steps: 300
opt_learning_rate_warmup_factor: 0.1
opt_learning_rate_decay_steps: [3000, 3600]   # two decays of 0.1 (MLPerf); 625 steps per epoch
opt_learning_rate_decay_factor: 0.1
num_image_candidates: 1000       # proposals kept per training image after NMS: a multiple of 1000 (MLPerf)
rpn_batch_size_per_image: 256
rpn_pre_nms_topk_train: 1000
rpn_pre_nms_topk_test: 600
rpn_post_nms_topk_test: 100
rpn_nms_iou_threshold: 0.7
roi_batch_size_per_image: 64
roi_positive_fraction: 0.25
score_threshold: 0.05
nms_iou_threshold: 0.5
max_detections: 100
augment_flip: true
bn_momentum: 0.9
max_epochs: 8
seed: 1
)";

const std::string kMaskrcnnReferenceDefaults = R"(# maskrcnn, reference scale: COCO 2017 (MLPerf v0.7's Mask R-CNN hyperparameters)
# R-50-FPN as MLPerf's; its batch norm is trained where the reference freezes it (README.md).
model: maskrcnn_r50
global_batch_size: 16
model_bn_span: 0
opt_name: sgd
opt_base_learning_rate: 0.02
opt_momentum: 0.9
opt_weight_decay: 0.0001
lr_decay: maskrcnn
opt_learning_rate_warmup_steps: 1000
opt_learning_rate_warmup_factor: 0.001
opt_learning_rate_decay_steps: [60000, 80000]
opt_learning_rate_decay_factor: 0.1
num_image_candidates: 2000
rpn_batch_size_per_image: 256
rpn_pre_nms_topk_train: 2000
rpn_pre_nms_topk_test: 1000
rpn_post_nms_topk_test: 1000
rpn_nms_iou_threshold: 0.7
roi_batch_size_per_image: 512
roi_positive_fraction: 0.25
score_threshold: 0.05
nms_iou_threshold: 0.5
max_detections: 100
augment_flip: true
bn_momentum: 0.9
max_epochs: 13
seed: 1
)";

}  // namespace mlpd
