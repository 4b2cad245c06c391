#include "workloads/minigo/minigo_config.h"

#include "mlperf/keys.h"

namespace mlpd {

MinigoConfig read_minigo_config(const nlohmann::json& c) {
  MinigoConfig r;
  r.board_size = c.at("board_size").get<int>();
  r.komi = c.at("komi").get<double>();
  r.tower_blocks = c.at("tower_blocks").get<int>();
  r.tower_channels = c.at("tower_channels").get<int>();
  r.value_hidden = c.at("value_hidden").get<int>();
  r.bn_momentum = c.at("bn_momentum").get<float>();
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.games_per_generation = c.at("selfplay_games_per_generation").get<int>();
  r.window_generations = c.at(keys::kWindowSize).get<int>();
  r.steps_per_generation = c.at("steps_per_generation").get<int>();
  SelfPlayConfig& s = r.selfplay;
  s.mcts.simulations = c.at(keys::kNumReadouts).get<int>();
  s.mcts.virtual_losses = c.at(keys::kVirtualLosses).get<int>();
  s.mcts.c_puct = c.at("c_puct").get<float>();
  s.mcts.dirichlet_alpha = c.at("dirichlet_alpha").get<float>();
  s.mcts.noise_fraction = c.at("noise_fraction").get<float>();
  s.mcts.respect_own_eyes = c.at("respect_own_eyes").get<bool>();
  s.temperature_moves = c.at("temperature_moves").get<int>();
  // MiniGo logs the threshold as a positive number: a game resigns below -threshold.
  s.resign_threshold = -c.at(keys::kResignThreshold).get<float>();
  s.no_resign_fraction = c.at(keys::kDisableResignPct).get<float>();
  s.max_moves = 3 * r.board_size * r.board_size;
  r.eval_games = c.at(keys::kEvalGames).get<int>();
  r.eval_readouts = c.at("eval_readouts").get<int>();
  r.reference_readouts = c.at("reference_readouts").get<int>();
  r.gnugo_games = c.at("gnugo_games").get<int>();
  r.gnugo_level = c.at("gnugo_level").get<int>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  return r;
}

}  // namespace mlpd
