// Self-play as MiniGo's: each move searched with MCTS from the current network (Dirichlet noise at
// the root), chosen in proportion to visits for the first `temperature_moves` moves and by most
// visits after; a game resigns when the root value falls below the threshold, except a fixed
// fraction of games that never resign (to check the threshold). A game's record is its moves and
// the root visit counts of each move: what ranks send each other; training examples (features,
// visit distribution, outcome from the side to move) are rebuilt from it where they are used.
#pragma once
#include <cstdint>
#include <vector>

#include <boost/serialization/vector.hpp>

#include "minigo/go_game.h"
#include "minigo/mcts.h"

namespace mlpd {

struct SelfPlayConfig {
  MctsConfig mcts;
  int temperature_moves = 10;
  float resign_threshold = -0.9f;
  float no_resign_fraction = 0.1f;
  int max_moves = 0;  // 0: 2 * size * size
};

struct GameRecord {
  GoGame game;
  std::vector<std::vector<uint16_t>> visits;  // per move, [size*size+1]
  bool resignation_disabled = false;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & game & visits & resignation_disabled;
  }
};

// "B+3.5", "W+0.5" or "0" for an area margin (black's view, komi included).
std::string result_text(double black_margin);

// One game from an empty board; deterministic in (seed, game_index) for a deterministic evaluator.
GameRecord self_play_game(const MctsEvaluator& eval, const SelfPlayConfig& cfg, int size, double komi, uint64_t seed,
                          uint64_t game_index);

struct TrainingExample {
  std::vector<float> features;  // [size, size, 17]
  std::vector<float> policy;    // [size*size+1], sums to 1
  float outcome = 0;            // +1 the side to move won, -1 lost
};
// One example per move of a finished game (result "B+..." or "W+...").
std::vector<TrainingExample> training_examples(const GameRecord& r);

// The 8 symmetries of the square (0 = identity; 1-3 rotations, 4-7 reflections) applied to the
// planes of an example and to its policy (the pass stays last). inverse_symmetry(s) undoes s.
void apply_symmetry(int s, int size, const TrainingExample& in, TrainingExample& out);
int inverse_symmetry(int s);

}  // namespace mlpd
