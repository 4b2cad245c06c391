// The minigo workload's embedded defaults: every tunable key, with MLPerf's (MiniGo's) own names
// where one exists. A --config file and --set may change values, never add keys.
#include <string>

namespace mlpd {

extern const std::string kMinigoMiniDefaults;
extern const std::string kMinigoReferenceDefaults;

const std::string kMinigoMiniDefaults = R"(# minigo, mini scale: 9x9 Go from self-play, a small tower, a fixed MCTS baseline as the opponent
board_size: 9
komi: 7.5
tower_blocks: 2
tower_channels: 32
value_hidden: 64
bn_momentum: 0.9
global_batch_size: 64            # positions per training step (MiniGo's train_batch_size)
model_bn_span: 0                 # 0 = the per-rank batch
selfplay_games_per_generation: 64
window_size: 4                   # generations of games the trainer samples positions from
steps_per_generation: 150
num_readouts: 64                 # MCTS simulations per self-play move
virtual_losses: 8                # leaves per network batch
c_puct: 1.5
dirichlet_alpha: 0.3
noise_fraction: 0.25
temperature_moves: 12            # moves chosen in proportion to visits, then the most visited
respect_own_eyes: true           # never fill an own eye; pass only when nothing else is left
resign_threshold: 1.0            # never resign (below -1): a young value net is too sure
disable_resign_pct: 0.1          # fraction of games that never resign
eval_games: 40                   # against the reference opponent, colours alternating
eval_readouts: 64
reference_readouts: 32           # the fixed MCTS baseline's simulations per move
gnugo_games: 2                   # against GNU Go per evaluation: a strength figure, never the target
gnugo_level: 1
opt_name: sgd
opt_base_learning_rate: 0.05
opt_momentum: 0.9
opt_weight_decay: 0.0001
lr_decay: step
lr_decay_epochs: 1.0
opt_end_learning_rate: 0.0
opt_learning_rate_decay_poly_power: 1.0
opt_learning_rate_warmup_epochs: 0.0
opt_learning_rate_decay_boundary_epochs: [12]
opt_learning_rate_decay_factor: 0.1
max_epochs: 30                   # generations
seed: 1
)";

const std::string kMinigoReferenceDefaults = R"(# minigo, reference scale: MLPerf v0.7 MiniGo's 9x9 setup (a GPU cluster's starting point)
board_size: 9
komi: 7.5
tower_blocks: 9
tower_channels: 128
value_hidden: 128
bn_momentum: 0.9
global_batch_size: 8192
model_bn_span: 0
selfplay_games_per_generation: 8192
window_size: 5
steps_per_generation: 256
num_readouts: 240
virtual_losses: 8
c_puct: 1.5
dirichlet_alpha: 0.3
noise_fraction: 0.25
temperature_moves: 12
respect_own_eyes: true
resign_threshold: 0.9
disable_resign_pct: 0.1
eval_games: 100
eval_readouts: 240
reference_readouts: 800
gnugo_games: 10
gnugo_level: 10
opt_name: sgd
opt_base_learning_rate: 0.02
opt_momentum: 0.9
opt_weight_decay: 0.0001
lr_decay: step
lr_decay_epochs: 1.0
opt_end_learning_rate: 0.0
opt_learning_rate_decay_poly_power: 1.0
opt_learning_rate_warmup_epochs: 0.0
opt_learning_rate_decay_boundary_epochs: [40, 80]
opt_learning_rate_decay_factor: 0.1
max_epochs: 100
seed: 1
)";

}  // namespace mlpd
