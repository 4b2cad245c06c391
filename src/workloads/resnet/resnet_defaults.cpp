// The resnet workload's embedded defaults: every tunable key, with MLPerf's own names where one
// exists. A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kResnetMiniDefaults;
extern const std::string kResnetReferenceDefaults;

const std::string kResnetMiniDefaults = R"(# resnet, mini scale: ResNet-20 (16/32/64) on Fashion-MNIST 28x28x1
model: resnet20
blocks_per_stage: 3
global_batch_size: 128
model_bn_span: 0                 # samples per batch-norm group; 0 = the per-rank batch
opt_name: sgd
opt_base_learning_rate: 0.1
opt_momentum: 0.9
opt_weight_decay: 0.0004         # 1e-4 * 2^2
opt_learning_rate_warmup_epochs: 0.5
lr_decay: poly                   # poly (MLPerf's closed SGD schedule), cosine or step
lr_decay_epochs: 6.0             # length of the whole schedule, warmup included
opt_end_learning_rate: 0.0001
opt_learning_rate_decay_poly_power: 2.0
opt_learning_rate_decay_boundary_epochs: [5.0, 8.0]
opt_learning_rate_decay_factor: 0.1
lars_opt_base_learning_rate: 2.0
lars_opt_end_learning_rate: 0.0001
lars_opt_learning_rate_decay_poly_power: 2.0
lars_opt_learning_rate_warmup_epochs: 0.5
lars_opt_momentum: 0.9
lars_opt_weight_decay: 0.0001
lars_epsilon: 0.0
lars_opt_trust_coefficient: 0.001
label_smoothing: 0.1
augment_pad: 2
augment_flip: true
bn_momentum: 0.9
zero_init_residual: true
max_epochs: 8
seed: 1
)";

const std::string kResnetReferenceDefaults = R"(# resnet, reference scale: ResNet-50 v1.5 on ImageNet (MLPerf v0.7), LARS
# A starting point for GPU clusters: tune global batch and LR per system within the rules table.
model: resnet50
blocks_per_stage: 3
global_batch_size: 3072
model_bn_span: 0
opt_name: lars
opt_base_learning_rate: 0.1
opt_momentum: 0.9
opt_weight_decay: 0.0001
opt_learning_rate_warmup_epochs: 5.0
lr_decay: poly
lr_decay_epochs: 41.0
opt_end_learning_rate: 0.0001
opt_learning_rate_decay_poly_power: 2.0
opt_learning_rate_decay_boundary_epochs: [30.0, 60.0, 80.0]
opt_learning_rate_decay_factor: 0.1
lars_opt_base_learning_rate: 10.0
lars_opt_end_learning_rate: 0.0001
lars_opt_learning_rate_decay_poly_power: 2.0
lars_opt_learning_rate_warmup_epochs: 5.0
lars_opt_momentum: 0.9
lars_opt_weight_decay: 0.0001
lars_epsilon: 0.0
lars_opt_trust_coefficient: 0.001
label_smoothing: 0.1
augment_pad: 0
augment_flip: true
bn_momentum: 0.9
zero_init_residual: true
max_epochs: 60
seed: 1
)";

}  // namespace mlpd
