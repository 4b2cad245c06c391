// GNU Go as the referee of the Go engine: random 9x9 games played to the end (no move fills the
// mover's own eye), every move also played into `gnugo --mode gtp --chinese-rules`, and our area
// score with komi 7.5 compared with GNU Go's final_score. Played out like this, no stone on the
// board is dead, so the two must agree exactly. Then games where GNU Go chooses White's moves until
// it passes, finished the same way.
// Fails (does not skip) without GNU Go: launch/install-deps installs it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/rng.h"
#include "minigo/go_board.h"
#include "minigo/playout.h"
#include "minigo/gtp_client.h"
#include "minigo/match.h"

using namespace mlpd;

namespace {


}  // namespace

TEST(GnuGoReferee, RandomGamesScoreAsGnuGoScoresThem) {
  GtpClient gnugo(gnugo_command(1, 7.5, 9));
  Rng r{2024, 0};
  std::vector<int> scratch;
  for (int game = 0; game < 24; ++game) {
    gnugo.command("clear_board");
    GoBoard b = new_board(9);
    while (!game_over(b) && b.moves < 400) {
      const int m = random_playout_move(b, r, scratch);
      gnugo.command(std::string("play ") + (b.to_play == kBlack ? "B " : "W ") + gtp_vertex(m, 9));
      play(b, m);
    }
    ASSERT_TRUE(game_over(b)) << "game " << game << " did not end in 400 moves";
    EXPECT_DOUBLE_EQ(tromp_taylor_score(b, 7.5), parse_final_score(gnugo.command("final_score")))
        << "game " << game << "\n" << board_to_string(b);
  }
}

TEST(GnuGoReferee, GamesAgainstGnuGoScoreAsGnuGoScoresThem) {
  GtpClient gnugo(gnugo_command(1, 7.5, 9));
  Rng r{77, 0};
  std::vector<int> scratch;
  int scored = 0;
  for (int game = 0; game < 3; ++game) {
    gnugo.command("clear_board");
    GoBoard b = new_board(9);
    bool resigned = false;
    while (!game_over(b) && b.moves < 400) {
      int m;
      if (b.to_play == kBlack) {
        m = random_playout_move(b, r, scratch);
        gnugo.command("play B " + gtp_vertex(m, 9));
      } else {
        const std::string v = gnugo.command("genmove W");
        if (v == "resign" || v == "RESIGN") {
          resigned = true;
          break;
        }
        m = parse_gtp_vertex(v, 9);
        ASSERT_GE(m, 0) << "gnugo played '" << v << "'";
        ASSERT_TRUE(is_legal(b, m)) << "gnugo's move " << v << " is illegal here:\n" << board_to_string(b);
      }
      play(b, m);
    }
    if (resigned) continue;
    // GNU Go passes when it judges the game over, with stones on the board it calls dead; area
    // scoring counts every stone still there, so both sides then play on at random until neither
    // has a move but its own eyes: dead stones are taken off, and the scores must agree.
    b.passes = 0;
    while (!game_over(b) && b.moves < 800) {
      const int m = random_playout_move(b, r, scratch);
      gnugo.command(std::string("play ") + (b.to_play == kBlack ? "B " : "W ") + gtp_vertex(m, 9));
      play(b, m);
    }
    ASSERT_TRUE(game_over(b));
    EXPECT_DOUBLE_EQ(tromp_taylor_score(b, 7.5), parse_final_score(gnugo.command("final_score"))) << board_to_string(b);
    ++scored;
  }
  std::printf("games against gnugo scored: %d of 3 (others resigned)\n", scored);
}

TEST(GnuGoReferee, AMissingEngineIsAClearError) {
  try {
    GtpClient missing({"gnugo-not-installed-here"});
    FAIL() << "started a missing engine";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start"), std::string::npos) << e.what();
  }
}
