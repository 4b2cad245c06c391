// Self-play (src/minigo/selfplay.h) with an evaluator written here: legal finished games whose
// record replays, one example per move with the visits as its policy and the outcome from the
// side to move, records through Boost.Serialization, the same game for the same seed, and the
// eight symmetries.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/serialize.h"
#include "minigo/features.h"
#include "minigo/selfplay.h"

using namespace mlpd;

namespace {

MctsEvaluator uniform(int size) {
  return [=](int n, const float*, float* policy, float* value) {
    const int moves = size * size + 1;
    for (int i = 0; i < n; ++i) {
      value[i] = 0.0f;
      for (int m = 0; m < moves; ++m) policy[size_t(i) * moves + m] = 1.0f / float(moves);
    }
  };
}

SelfPlayConfig small_config() {
  SelfPlayConfig c;
  c.mcts.simulations = 16;
  c.mcts.virtual_losses = 4;
  c.temperature_moves = 100;
  c.no_resign_fraction = 1.0f;  // the uniform evaluator's value is 0: never resigns anyway
  return c;
}

}  // namespace

TEST(SelfPlay, GamesAreLegalFinishedAndReproducible) {
  const GameRecord a = self_play_game(uniform(5), small_config(), 5, 7.5, 1, 0);
  const GameRecord b = self_play_game(uniform(5), small_config(), 5, 7.5, 1, 0);
  const GameRecord c = self_play_game(uniform(5), small_config(), 5, 7.5, 1, 1);
  EXPECT_EQ(a.game.moves, b.game.moves);
  EXPECT_NE(a.game.moves, c.game.moves);
  const GoBoard end = replay(a.game);  // throws on an illegal move
  EXPECT_TRUE(game_over(end) || int(a.game.moves.size()) == 50);
  ASSERT_EQ(a.visits.size(), a.game.moves.size());
  for (const auto& v : a.visits) {
    int total = 0;
    for (uint16_t x : v) total += x;
    EXPECT_EQ(total, 16);
  }
  EXPECT_TRUE(a.game.result[0] == 'B' || a.game.result[0] == 'W');
  const GameRecord back = from_bytes<GameRecord>(to_bytes(a));
  EXPECT_EQ(back.game.moves, a.game.moves);
  EXPECT_EQ(back.visits, a.visits);
}

TEST(SelfPlay, ExamplesCarryVisitsAndTheOutcomeOfTheSideToMove) {
  const GameRecord r = self_play_game(uniform(5), small_config(), 5, 7.5, 2, 0);
  const std::vector<TrainingExample> ex = training_examples(r);
  ASSERT_EQ(ex.size(), r.game.moves.size());
  const float black = r.game.result[0] == 'B' ? 1.0f : -1.0f;
  for (size_t i = 0; i < ex.size(); ++i) {
    double sum = 0;
    for (float p : ex[i].policy) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_EQ(ex[i].outcome, i % 2 == 0 ? black : -black);  // black moves first
    // The to-move plane: 1s on black's turns.
    EXPECT_EQ(ex[i].features[2 * kFeatureHistory], i % 2 == 0 ? 1.0f : 0.0f);
    // The most visited move is a legal move of that position: its point is empty in plane 0 and 1.
    const size_t best = size_t(std::max_element(ex[i].policy.begin(), ex[i].policy.end()) - ex[i].policy.begin());
    if (best < 25) {
      EXPECT_EQ(ex[i].features[best * kFeaturePlanes + 0], 0.0f);
      EXPECT_EQ(ex[i].features[best * kFeaturePlanes + 1], 0.0f);
    }
  }
}

TEST(SelfPlay, TheEightSymmetriesAreDistinctAndInvertible) {
  const GameRecord r = self_play_game(uniform(5), small_config(), 5, 7.5, 3, 0);
  const std::vector<TrainingExample> ex = training_examples(r);
  const TrainingExample& e = ex[std::min<size_t>(6, ex.size() - 1)];
  std::set<std::vector<float>> distinct;
  for (int s = 0; s < 8; ++s) {
    TrainingExample t, back;
    apply_symmetry(s, 5, e, t);
    apply_symmetry(inverse_symmetry(s), 5, t, back);
    EXPECT_EQ(back.features, e.features) << "symmetry " << s;
    EXPECT_EQ(back.policy, e.policy) << "symmetry " << s;
    EXPECT_EQ(t.policy.back(), e.policy.back());  // the pass stays
    distinct.insert(t.features);
  }
  EXPECT_GE(distinct.size(), 2u);
}
