// Games between players (src/minigo/match.h): the rollout search of the reference opponent
// against the random player (results agree with the board), boards rebuilt
// from stones, and games against GNU Go, scored by GNU Go (it removes dead stones), which beats
// the random player from either side.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "minigo/go_board.h"
#include "minigo/go_game.h"
#include "minigo/match.h"
#include "minigo/playout.h"
#include "minigo/selfplay.h"

using namespace mlpd;


TEST(Match, TheRolloutSearchBeatsTheRandomPlayerAndGamesEndWithTheResultOfTheirBoard) {
  MctsConfig cfg;
  cfg.simulations = 32;
  cfg.respect_own_eyes = true;  // as the workload's reference opponent
  GoPlayer mc = mcts_player("rollout-mcts", rollout_evaluator(9, 7.5, 1, 3), cfg, 4);
  GoPlayer r = random_player();
  int mc_wins = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const bool mc_black = seed % 2 == 1;
    const MatchGame m = mc_black ? play_match_game(mc, r, 9, 7.5, 162, seed) : play_match_game(r, mc, 9, 7.5, 162, seed);
    const GoBoard end = replay(m.game);
    EXPECT_DOUBLE_EQ(m.black_margin, tromp_taylor_score(end, 7.5));
    EXPECT_EQ(m.game.result, result_text(m.black_margin));
    EXPECT_EQ(m.game.black, mc_black ? "rollout-mcts" : "random");
    mc_wins += (m.black_margin > 0) == mc_black;
  }
  EXPECT_GE(mc_wins, 7) << "of 8";
  // The openings are drawn from the game's seed: two seeds, two different games; one seed, one game.
  const MatchGame g1 = play_match_game(mc, mc, 9, 7.5, 162, 11), g2 = play_match_game(mc, mc, 9, 7.5, 162, 12);
  const MatchGame g1again = play_match_game(mc, mc, 9, 7.5, 162, 11);
  EXPECT_NE(g1.game.moves, g2.game.moves);
  EXPECT_EQ(g1.game.moves, g1again.game.moves);
}

TEST(Match, ABoardRebuiltFromItsStonesPlaysOnAsTheOriginal) {
  Rng r{9, 9};
  std::vector<int> scratch;
  for (int game = 0; game < 20; ++game) {
    GoBoard b = new_board(9);
    const int plies = 20 + game * 7;
    while (!game_over(b) && b.moves < plies) play(b, random_playout_move(b, r, scratch));
    const GoBoard c = board_from_stones(9, b.stones, b.to_play);
    EXPECT_EQ(c.stones, b.stones);
    EXPECT_EQ(c.to_play, b.to_play);
    EXPECT_EQ(tromp_taylor_score(c, 7.5), tromp_taylor_score(b, 7.5));
    // Captures work on the rebuilt board as on the original: the same playout, the same end.
    Rng r1{game + 100u, 1}, r2{game + 100u, 1};
    EXPECT_EQ(random_playout(b, r1, 300, 7.5, scratch), random_playout(c, r2, 300, 7.5, scratch)) << game;
  }
}

TEST(Match, GnuGoBeatsARandomPlayerFromEitherSideAndScoresTheGame) {
  GoPlayer gnugo = gnugo_player(1, 7.5, 9);
  GoPlayer r = random_player();
  const MatchGame as_black = play_match_game(gnugo, r, 9, 7.5, 162, 3);
  const MatchGame as_white = play_match_game(r, gnugo, 9, 7.5, 162, 4);
  EXPECT_EQ(as_black.game.result[0], 'B') << as_black.game.result << "\n" << to_sgf(as_black.game);
  EXPECT_EQ(as_white.game.result[0], 'W') << as_white.game.result << "\n" << to_sgf(as_white.game);
  for (const MatchGame* m : {&as_black, &as_white})
    if (m->game.result.find("+R") == std::string::npos) {
      // Scored by GNU Go: the result and the margin agree.
      EXPECT_EQ(m->game.result, result_text(m->black_margin));
      EXPECT_NE(m->black_margin, 0.0);
    }
  EXPECT_DOUBLE_EQ(parse_final_score("B+12.5"), 12.5);
  EXPECT_DOUBLE_EQ(parse_final_score("W+0.5"), -0.5);
  EXPECT_DOUBLE_EQ(parse_final_score("0"), 0.0);
  EXPECT_THROW(parse_final_score("? cannot score"), std::runtime_error);
}
