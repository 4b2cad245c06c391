// The minigo workload's hyperparameters, typed: read once from the resolved, rule-checked config.
// (The optimizer and schedule keys are read by train/hyperparams.h, the run keys by train/.)
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "minigo/selfplay.h"

namespace mlpd {

struct MinigoConfig {
  int board_size = 9;
  double komi = 7.5;
  int tower_blocks = 2;
  int tower_channels = 32;
  int value_hidden = 64;
  float bn_momentum = 0.9f;
  int64_t global_batch = 64;
  int games_per_generation = 64;  // self-play games of one generation, over all ranks
  int window_generations = 4;     // training samples positions of the last this many generations
  int steps_per_generation = 40;
  SelfPlayConfig selfplay;        // num_readouts, virtual_losses, noise, temperature, resignation
  int eval_games = 20;            // against the reference opponent, colours alternating
  int eval_readouts = 32;         // the network's simulations per move in evaluation
  int reference_readouts = 32;    // the reference opponent's
  int gnugo_games = 2;            // per evaluation (0: none), for the strength figure only
  int gnugo_level = 1;
  uint64_t seed = 1;
};

MinigoConfig read_minigo_config(const nlohmann::json& config);

}  // namespace mlpd
