// The transformer workload's embedded defaults: every tunable key, with MLPerf's names where one
// exists. A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kTransformerMiniDefaults;
extern const std::string kTransformerReferenceDefaults;

const std::string kTransformerMiniDefaults = R"(# transformer, mini scale: German->English sentence pairs of Debian's trans-de-en, BLEU (cased)
d_model: 256
heads: 4
ffn_dim: 512                     # 2 x d_model at mini (CPU time); the reference uses 4 x
encoder_layers: 3
decoder_layers: 3
dropout: 0.1                     # residual and embedding dropout
label_smoothing: 0.1
max_sequence_length: 64          # tokens per side; longer training pairs are discarded or truncated
max_sequence_length_method: discard
global_batch_size: 64            # sentence pairs (calibrated: README.md)
opt_name: adam
opt_base_learning_rate: 0.001
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.98
opt_adam_epsilon: 1e-9           # fixed by MLPerf
lr_schedule: inverse_sqrt
opt_learning_rate_warmup_steps: 400
grad_clip_norm: 0
eval_beam_size: 4
eval_length_penalty: 0.6
eval_batch_size: 32
max_epochs: 14
seed: 1
)";

const std::string kTransformerReferenceDefaults = R"(# transformer, reference scale: Transformer big on WMT17 En-De (MLPerf v0.7), BLEU (cased)
d_model: 1024
heads: 16
ffn_dim: 4096
encoder_layers: 6
decoder_layers: 6
dropout: 0.1
label_smoothing: 0.1
max_sequence_length: 256
max_sequence_length_method: discard
global_batch_size: 2048
opt_name: adam
opt_base_learning_rate: 0.001976
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.997
opt_adam_epsilon: 1e-9
lr_schedule: inverse_sqrt
opt_learning_rate_warmup_steps: 1000
grad_clip_norm: 0
eval_beam_size: 4
eval_length_penalty: 0.6
eval_batch_size: 64
max_epochs: 30
seed: 1
)";

}  // namespace mlpd
