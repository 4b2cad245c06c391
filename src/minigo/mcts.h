// Monte Carlo tree search as MiniGo's (AlphaGo Zero's): PUCT selection, leaves evaluated in
// batches of `virtual_losses` (each selected leaf adds a virtual loss on its path so the batch
// spreads), Dirichlet noise on the root priors in self-play, and move choice by visit counts with a
// temperature. The network is behind `MctsEvaluator`, so the search is tested without one.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "minigo/go_board.h"

namespace mlpd {

struct MctsConfig {
  int simulations = 64;       // leaf evaluations per move
  float c_puct = 1.5f;
  int virtual_losses = 8;     // leaves per network batch (MLPerf's tunable `virtual_losses`)
  float dirichlet_alpha = 0.3f;
  float noise_fraction = 0.25f;  // of the root priors, in self-play
  // Never search a move that fills the mover's own eye-like point, and search the pass only when
  // no other move is left: the random playout's rule, given to the search as knowledge. Without it
  // a young network fills its own eyes, and learns from self-play to pass early (its opponent
  // passes back) and then loses every stone to an opponent that plays on.
  bool respect_own_eyes = false;
};

// Evaluates n positions: features [n, size, size, 17] (minigo/features.h) -> policy [n, size*size+1]
// (probabilities over moves, pass last) and value [n] in [-1, 1] for the side to move.
using MctsEvaluator = std::function<void(int n, const float* features, float* policy, float* value)>;

struct MctsTree;

// A search from `root`; `earlier`: the stones of the positions before it, most recent first (for
// the history planes; may be empty).
std::unique_ptr<MctsTree> mcts_new(const GoBoard& root, std::vector<std::vector<int8_t>> earlier);
// Runs cfg.simulations more simulations. With noise, the root priors get Dirichlet noise drawn
// from (seed, the root's move number).
void mcts_search(MctsTree& t, const MctsConfig& cfg, const MctsEvaluator& eval, bool noise, uint64_t seed);
// Visit counts of the root's moves, [size*size+1].
std::vector<int> mcts_root_visits(const MctsTree& t);
// The root's mean value for the side to move (Q of the root), in [-1, 1].
float mcts_root_value(const MctsTree& t);
// The most visited move (temperature 0; ties drawn at random) or a draw proportional to visits
// (temperature 1), from (seed, counter).
int mcts_choose(const std::vector<int>& visits, bool proportional, uint64_t seed, uint64_t counter);

}  // namespace mlpd

template <>
struct std::default_delete<mlpd::MctsTree> {
  void operator()(mlpd::MctsTree* p) const;
};
