// The gnmt workload's embedded defaults: every tunable key, with MLPerf's names where one exists.
// A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kGnmtMiniDefaults;
extern const std::string kGnmtReferenceDefaults;

const std::string kGnmtMiniDefaults = R"(# gnmt, mini scale: German->English sentence pairs of Debian's trans-de-en, BLEU (uncased)
hidden_size: 256
encoder_layers: 2                # the first bidirectional
decoder_layers: 2
dropout: 0.2
label_smoothing: 0.1
max_sequence_length: 64          # tokens per side; longer training pairs are discarded or truncated
max_sequence_length_method: discard
global_batch_size: 32            # sentence pairs (calibrated: README.md)
opt_name: adam
opt_base_learning_rate: 0.002
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.999
opt_adam_epsilon: 1e-8
lr_schedule: gnmt                # exponential warmup, constant, then decay_steps halvings
opt_learning_rate_warmup_steps: 200
opt_learning_rate_remain_steps: 3000
opt_learning_rate_decay_interval: 400
opt_learning_rate_decay_steps: 4
opt_learning_rate_decay_factor: 0.5
grad_clip_norm: 5.0
eval_beam_size: 4
eval_length_penalty: 0.6
eval_batch_size: 32
max_epochs: 12
seed: 1
)";

const std::string kGnmtReferenceDefaults = R"(# gnmt, reference scale: GNMT on WMT16 En-De (MLPerf v0.7 reference), BLEU (uncased)
hidden_size: 1024
encoder_layers: 4
decoder_layers: 4
dropout: 0.2
label_smoothing: 0.1
max_sequence_length: 75
max_sequence_length_method: discard
global_batch_size: 1024
opt_name: adam
opt_base_learning_rate: 0.002
opt_adam_beta_1: 0.9
opt_adam_beta_2: 0.999
opt_adam_epsilon: 1e-8
lr_schedule: gnmt
opt_learning_rate_warmup_steps: 200
opt_learning_rate_remain_steps: 6453
opt_learning_rate_decay_interval: 809
opt_learning_rate_decay_steps: 4
opt_learning_rate_decay_factor: 0.5
grad_clip_norm: 5.0
eval_beam_size: 5
eval_length_penalty: 0.6
eval_batch_size: 64
max_epochs: 8
seed: 1
)";

}  // namespace mlpd
