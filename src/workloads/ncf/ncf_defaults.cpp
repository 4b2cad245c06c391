// The ncf workload's embedded defaults: every tunable key, with MLPerf's names where one exists.
// A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kNcfMiniDefaults;
extern const std::string kNcfReferenceDefaults;

const std::string kNcfMiniDefaults = R"(# ncf, mini scale: NeuMF on MovieLens ml-latest-small (r-cran-dslabs), HR@10 vs 999 negatives
mf_dim: 64                       # GMF factors
mlp_layer_sizes: [256, 256, 128, 64]  # first = the two MLP embeddings concatenated
train_negatives: 4               # sampled per positive per epoch
global_batch_size: 4096          # positives + negatives (calibrated: README.md)
opt_name: adam                   # adam (MLPerf v0.5) or lazy_adam
opt_base_learning_rate: 0.003
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.999
opt_adam_epsilon: 1e-8
max_epochs: 12
seed: 1
)";

const std::string kNcfReferenceDefaults = R"(# ncf, reference scale: NeuMF on MovieLens-20M (MLPerf v0.5 reference run: -l 0.0005 -b 2048
# --layers 256 256 128 64 -f 64, threshold 0.635). Tune batch and LR per system within the rules.
mf_dim: 64
mlp_layer_sizes: [256, 256, 128, 64]
train_negatives: 4
global_batch_size: 2048
opt_name: adam
opt_base_learning_rate: 0.0005
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.999
opt_adam_epsilon: 1e-8
max_epochs: 20
seed: 1
)";

}  // namespace mlpd
