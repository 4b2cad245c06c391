// The ssd workload's embedded defaults: every tunable key, with MLPerf's own names where one
// exists. A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kSsdMiniDefaults;
extern const std::string kSsdReferenceDefaults;

const std::string kSsdMiniDefaults = R"(# ssd, mini scale: a small SSD on 96x96 Fashion-MNIST scenes (semi-synthetic)
model: ssd_mini
global_batch_size: 64
model_bn_span: 0                 # samples per batch-norm group; 0 = the per-rank batch
opt_name: sgd
opt_base_learning_rate: 0.05
opt_momentum: 0.9
opt_weight_decay: 0.0005
lr_decay: ssd                    # MLPerf SSD: warmup steps with an integer factor, then steps at epochs
opt_learning_rate_warmup_steps: 300
opt_learning_rate_warmup_factor: 0
opt_learning_rate_decay_boundary_epochs: [8, 10]   # multiples of 4 and 5 (closed_ssd.yaml's form)
opt_learning_rate_decay_factor: 0.1
max_samples: 1                   # random-crop attempts per image: 1 or 50 (MLPerf)
match_iou_threshold: 0.5
neg_pos_ratio: 3.0
nms_iou_threshold: 0.5
score_threshold: 0.05
pre_nms_topk: 200
max_detections: 100
augment_flip: true
bn_momentum: 0.9
max_epochs: 12
seed: 1
)";

const std::string kSsdReferenceDefaults = R"(# ssd, reference scale: SSD300-ResNet34 on COCO 2017 (MLPerf v0.7)
# A starting point for GPU clusters: tune the batch and LR per system within the rules table.
model: ssd300
global_batch_size: 256
model_bn_span: 0
opt_name: sgd
opt_base_learning_rate: 0.02
opt_momentum: 0.9
opt_weight_decay: 0.0005
lr_decay: ssd
opt_learning_rate_warmup_steps: 650
opt_learning_rate_warmup_factor: 0
opt_learning_rate_decay_boundary_epochs: [44, 55]
opt_learning_rate_decay_factor: 0.1
max_samples: 1
match_iou_threshold: 0.5
neg_pos_ratio: 3.0
nms_iou_threshold: 0.5
score_threshold: 0.05
pre_nms_topk: 200
max_detections: 200
augment_flip: true
bn_momentum: 0.9
max_epochs: 65
seed: 1
)";

}  // namespace mlpd
