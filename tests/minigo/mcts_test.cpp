// MCTS (src/minigo/mcts.h) with evaluators written here instead of a network: a capture that wins
// material is found; leaves of one batch are spread by virtual losses; visits add up; the
// temperature draw follows the visits; features put stones in the right planes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "minigo/features.h"
#include "minigo/go_board.h"
#include "minigo/mcts.h"

using namespace mlpd;

namespace {

GoBoard position(int size, const std::vector<const char*>& moves) {
  GoBoard b = new_board(size);
  for (const char* m : moves) play(b, std::string(m) == "-" ? pass_move(size) : parse_gtp_vertex(m, size));
  return b;
}

// Uniform priors; value = material (own stones - opponent's, from the features' first two planes).
MctsEvaluator material_evaluator(int size, int* calls = nullptr, std::vector<int>* batches = nullptr) {
  return [=](int n, const float* f, float* policy, float* value) {
    if (calls) ++*calls;
    if (batches) batches->push_back(n);
    const int cells = size * size;
    for (int i = 0; i < n; ++i) {
      float own = 0, opp = 0;
      for (int p = 0; p < cells; ++p) {
        own += f[(size_t(i) * cells + p) * kFeaturePlanes + 0];
        opp += f[(size_t(i) * cells + p) * kFeaturePlanes + 1];
      }
      value[i] = std::tanh((own - opp) / 3.0f);
      for (int m = 0; m <= cells; ++m) policy[size_t(i) * (cells + 1) + m] = 1.0f / float(cells + 1);
    }
  };
}

}  // namespace

TEST(Mcts, FindsTheCaptureThatWinsAStone) {
  // White E5 in atari (black D5, F5, E6); black to move captures at E4.
  const GoBoard b = position(9, {"D5", "E5", "F5", "A1", "E6", "B1"});
  ASSERT_EQ(b.to_play, kBlack);
  auto tree = mcts_new(b, {});
  MctsConfig cfg;
  cfg.simulations = 800;
  cfg.virtual_losses = 8;
  mcts_search(*tree, cfg, material_evaluator(9), false, 1);
  const std::vector<int> visits = mcts_root_visits(*tree);
  EXPECT_EQ(mcts_choose(visits, false, 0, 0), parse_gtp_vertex("E4", 9));
  int total = 0;
  for (int v : visits) total += v;
  EXPECT_EQ(total, 800);
  EXPECT_GT(mcts_root_value(*tree), 0.0f);
}

TEST(Mcts, VirtualLossesSpreadABatchAndNothingIsLeftBehind) {
  const GoBoard b = new_board(5);
  auto tree = mcts_new(b, {});
  MctsConfig cfg;
  cfg.simulations = 64;
  cfg.virtual_losses = 8;
  int calls = 0;
  std::vector<int> batches;
  mcts_search(*tree, cfg, material_evaluator(5, &calls, &batches), true, 3);
  // The root's own evaluation, then batches of 8 distinct leaves.
  ASSERT_GE(batches.size(), 2u);
  EXPECT_EQ(batches[0], 1);
  EXPECT_EQ(batches[1], 8);
  int total = 0;
  for (int v : mcts_root_visits(*tree)) total += v;
  EXPECT_EQ(total, 64);
  // A second search adds to the same tree.
  mcts_search(*tree, cfg, material_evaluator(5), false, 3);
  total = 0;
  for (int v : mcts_root_visits(*tree)) total += v;
  EXPECT_EQ(total, 128);
}

TEST(Mcts, TemperatureDrawFollowsTheVisits) {
  const std::vector<int> visits = {0, 30, 10, 0, 60};
  std::vector<int> hits(5, 0);
  for (uint64_t c = 0; c < 10000; ++c) ++hits[size_t(mcts_choose(visits, true, 9, c))];
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(hits[3], 0);
  EXPECT_NEAR(hits[1] / 10000.0, 0.3, 0.02);
  EXPECT_NEAR(hits[4] / 10000.0, 0.6, 0.02);
  EXPECT_EQ(mcts_choose(visits, false, 9, 0), 4);
}

TEST(Mcts, MostVisitsBreaksTiesAtRandomAndNeverPicksALesserMove) {
  // Moves 1, 3 and 6 tie for the most visits: each is drawn about a third of the time.
  const std::vector<int> visits = {0, 5, 1, 5, 0, 0, 5, 4};
  std::vector<int> hits(visits.size(), 0);
  for (uint64_t c = 0; c < 3000; ++c) ++hits[size_t(mcts_choose(visits, false, 7, c))];
  for (size_t m : {1, 3, 6}) EXPECT_NEAR(hits[m], 1000, 120) << "move " << m;
  EXPECT_EQ(hits[0] + hits[2] + hits[4] + hits[5] + hits[7], 0);
}

TEST(Mcts, RespectingOwnEyesSearchesNeitherTheEyesNorThePassWhileOtherMovesRemain) {
  // Black has eyes at A1 and C1 (walls B1, A2, B2, C2, D1, D2); black to move.
  const GoBoard b = position(5, {"B1", "E5", "A2", "E4", "B2", "E3", "C2", "D5", "D1", "D4", "D2", "C5"});
  ASSERT_EQ(b.to_play, kBlack);
  MctsConfig cfg;
  cfg.simulations = 200;
  cfg.respect_own_eyes = true;
  auto tree = mcts_new(b, {});
  mcts_search(*tree, cfg, material_evaluator(5), false, 1);
  const std::vector<int> visits = mcts_root_visits(*tree);
  EXPECT_EQ(visits[size_t(parse_gtp_vertex("A1", 5))], 0);
  EXPECT_EQ(visits[size_t(parse_gtp_vertex("C1", 5))], 0);
  EXPECT_EQ(visits[size_t(pass_move(5))], 0);
  // Without the rule the search visits them.
  cfg.respect_own_eyes = false;
  auto plain = mcts_new(b, {});
  mcts_search(*plain, cfg, material_evaluator(5), false, 1);
  const std::vector<int> v2 = mcts_root_visits(*plain);
  EXPECT_GT(v2[size_t(parse_gtp_vertex("A1", 5))] + v2[size_t(parse_gtp_vertex("C1", 5))] + v2[size_t(pass_move(5))], 0);
}

TEST(Features, PlanesHoldTheSideToMoveFirstAndTheHistory) {
  GoBoard b = new_board(5);
  std::vector<std::vector<int8_t>> history = {b.stones};
  play(b, parse_gtp_vertex("C3", 5));  // black
  history.insert(history.begin(), b.stones);
  play(b, parse_gtp_vertex("A1", 5));  // white; black to move
  std::vector<const std::vector<int8_t>*> positions = {&b.stones, &history[0], &history[1]};
  std::vector<float> f(25 * kFeaturePlanes);
  board_features(positions, 5, b.to_play, f.data());
  auto plane = [&](const char* v, int k) { return f[size_t(parse_gtp_vertex(v, 5)) * kFeaturePlanes + size_t(k)]; };
  EXPECT_EQ(plane("C3", 0), 1.0f);  // black (to move) now
  EXPECT_EQ(plane("A1", 1), 1.0f);  // white now
  EXPECT_EQ(plane("C3", 2), 1.0f);  // black one position ago
  EXPECT_EQ(plane("A1", 3), 0.0f);  // white was not there yet
  EXPECT_EQ(plane("C3", 4), 0.0f);  // the empty board
  EXPECT_EQ(plane("B2", 16), 1.0f);  // black to move
  float sum = 0;
  for (float x : f) sum += x;
  EXPECT_EQ(sum, 1 + 1 + 1 + 25);
}
