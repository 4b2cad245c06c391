// The Go engine (src/minigo/go_board.h): captures, suicide, ko and positional superko, scoring,
// vertices; the incremental group data against a from-scratch recount over random games; game
// records through SGF and Boost.Serialization.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <vector>

#include "core/rng.h"
#include "core/serialize.h"
#include "minigo/go_board.h"
#include "minigo/playout.h"
#include "minigo/go_game.h"

using namespace mlpd;

namespace {

// Plays vertices alternately from black; "-" is a pass.
GoBoard position(int size, const std::vector<const char*>& moves) {
  GoBoard b = new_board(size);
  for (const char* m : moves) play(b, std::string(m) == "-" ? pass_move(size) : parse_gtp_vertex(m, size));
  return b;
}

int at(const GoBoard& b, const char* v) { return b.stones[size_t(parse_gtp_vertex(v, b.size))]; }

// Groups and their pseudo-liberties by flood fill, compared with the incremental ones.
void expect_groups_consistent(const GoBoard& b) {
  const int n = b.size * b.size;
  for (int p = 0; p < n; ++p) {
    if (b.stones[size_t(p)] == kEmpty) {
      ASSERT_EQ(b.group[size_t(p)], -1);
      continue;
    }
    const int id = b.group[size_t(p)];
    ASSERT_GE(id, 0);
    ASSERT_EQ(b.stones[size_t(id)], b.stones[size_t(p)]);
  }
  std::vector<int> seen(size_t(n), 0);
  for (int p = 0; p < n; ++p) {
    if (b.stones[size_t(p)] == kEmpty || seen[size_t(p)]) continue;
    std::vector<int> stack{p}, members;
    seen[size_t(p)] = 1;
    int pseudo = 0;
    while (!stack.empty()) {
      const int q = stack.back();
      stack.pop_back();
      members.push_back(q);
      const int r = q / b.size, c = q % b.size;
      const int nbs[4][2] = {{r - 1, c}, {r + 1, c}, {r, c - 1}, {r, c + 1}};
      for (const auto& nb : nbs) {
        if (nb[0] < 0 || nb[1] < 0 || nb[0] >= b.size || nb[1] >= b.size) continue;
        const int x = nb[0] * b.size + nb[1];
        if (b.stones[size_t(x)] == kEmpty) ++pseudo;
        if (b.stones[size_t(x)] == b.stones[size_t(p)] && !seen[size_t(x)]) {
          seen[size_t(x)] = 1;
          stack.push_back(x);
        }
      }
    }
    const int id = b.group[size_t(p)];
    for (int m : members) ASSERT_EQ(b.group[size_t(m)], id) << "one chain, two group ids";
    ASSERT_EQ(b.count[size_t(id)], int(members.size()));
    ASSERT_EQ(b.pseudo[size_t(id)], pseudo);
    ASSERT_GT(pseudo, 0) << "a group without liberties stayed on the board";
    // The circular list holds exactly the members.
    int s = id, k = 0;
    do {
      ++k;
      s = b.next[size_t(s)];
    } while (s != id && k <= n);
    ASSERT_EQ(k, int(members.size()));
  }
}


}  // namespace

TEST(GoBoard, CapturesInTheMiddleOnTheEdgeAndInTheCorner) {
  // White D4 surrounded by black C4 E4 D5 D3: the last black stone captures.
  GoBoard b = position(9, {"C4", "D4", "E4", "-", "D5", "-", "D3"});
  EXPECT_EQ(at(b, "D4"), kEmpty);
  EXPECT_EQ(b.captured[0], 1);
  // Two white stones on the edge (A1, A2) lose their last liberty to black A3.
  b = position(9, {"B1", "A1", "B2", "A2", "A3"});
  EXPECT_EQ(at(b, "A1"), kEmpty);
  EXPECT_EQ(at(b, "A2"), kEmpty);
  EXPECT_EQ(b.captured[0], 2);
  // The corner: a white stone at A9 with black at A8 and B9.
  b = position(9, {"A8", "A9", "B9"});
  EXPECT_EQ(at(b, "A9"), kEmpty);
  expect_groups_consistent(b);
}

TEST(GoBoard, SuicideIsIllegalUnlessItCaptures) {
  // Black A2, B1: white A1 would be suicide.
  GoBoard b = position(9, {"A2", "-", "B1"});
  EXPECT_FALSE(is_legal(b, parse_gtp_vertex("A1", 9)));
  EXPECT_THROW(play(b, parse_gtp_vertex("A1", 9)), std::invalid_argument);
  // Black A2 and B1 each keep only A1 (white A3, B2, C1 around them): white A1 has no liberty of
  // its own but captures both, so it is legal.
  b = position(9, {"A2", "A3", "B1", "B2", "-", "C1", "-"});
  ASSERT_EQ(b.to_play, kWhite);
  EXPECT_TRUE(is_legal(b, parse_gtp_vertex("A1", 9)));
  play(b, parse_gtp_vertex("A1", 9));
  EXPECT_EQ(at(b, "A2"), kEmpty);
  EXPECT_EQ(at(b, "B1"), kEmpty);
  EXPECT_EQ(b.captured[1], 2);
  expect_groups_consistent(b);
}

TEST(GoBoard, KoRecaptureWaitsForAMoveElsewhereAndSuperkoForbidsRepeats) {
  // A ko at D5/E5: black D4 C5 D6, white E4 F5 E6; white plays D5, black captures at E5.
  GoBoard b = position(9, {"D4", "E4", "C5", "F5", "D6", "E6", "-", "D5", "E5"});
  ASSERT_EQ(at(b, "D5"), kEmpty);
  ASSERT_EQ(at(b, "E5"), kBlack);
  const int d5 = parse_gtp_vertex("D5", 9);
  EXPECT_FALSE(is_legal(b, d5)) << "immediate recapture of the ko";
  play(b, parse_gtp_vertex("A1", 9));  // white plays elsewhere (a threat)
  play(b, parse_gtp_vertex("J9", 9));  // black answers elsewhere
  EXPECT_TRUE(is_legal(b, d5)) << "the recapture is legal after moves elsewhere";
  play(b, d5);
  EXPECT_EQ(at(b, "E5"), kEmpty);
  expect_groups_consistent(b);
}

// Positional superko against the positions themselves (not hashes): in random games with many
// captures, a move is legal exactly when it is empty, not suicide, and its resulting position has
// not been seen in the game.
TEST(GoBoard, SuperkoAgreesWithTheExactPositionHistory) {
  Rng r{11, 0};
  std::vector<int> scratch;
  int checked = 0;
  for (int game = 0; game < 30; ++game) {
    GoBoard b = new_board(5);
    std::set<std::vector<int8_t>> seen{b.stones};
    for (int ply = 0; ply < 200 && !game_over(b); ++ply) {
      for (int m = 0; m < 25; ++m) {
        if (b.stones[size_t(m)] != kEmpty) continue;
        // The resulting position by brute force on a copy with superko disabled.
        GoBoard c = b;
        c.history.clear();
        c.hash ^= 0x1234567;  // never equal to the position after the move
        if (!is_legal(c, m)) {
          EXPECT_FALSE(is_legal(b, m));  // occupied or suicide
          continue;
        }
        play(c, m);
        const bool repeats = seen.count(c.stones) > 0;
        EXPECT_EQ(is_legal(b, m), !repeats) << board_to_string(b) << gtp_vertex(m, 5);
        ++checked;
      }
      play(b, random_playout_move(b, r, scratch));
      seen.insert(b.stones);
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(GoBoard, AreaScoringCountsSharedPointsForNobody) {
  // 5x5: black wall on column B, white wall on column D; column A is black's, column E white's,
  // column C touches both and counts for nobody (as the shared liberties of a seki).
  GoBoard b = new_board(5);
  for (int row = 0; row < 5; ++row) {
    play(b, row * 5 + 1);  // column B
    play(b, row * 5 + 3);  // column D
  }
  EXPECT_DOUBLE_EQ(tromp_taylor_score(b, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(tromp_taylor_score(b, 7.5), -7.5);
  play(b, parse_gtp_vertex("C3", 5));  // black takes a shared point: C3, and no region changes
  EXPECT_DOUBLE_EQ(tromp_taylor_score(b, 0.5), 0.5);
  EXPECT_FALSE(game_over(b));
  play(b, pass_move(5));
  play(b, pass_move(5));
  EXPECT_TRUE(game_over(b));
}

TEST(GoBoard, VerticesSkipTheLetterI) {
  EXPECT_EQ(parse_gtp_vertex("J9", 9), 8);
  EXPECT_EQ(parse_gtp_vertex("a1", 9), 72);
  EXPECT_EQ(parse_gtp_vertex("PASS", 9), 81);
  EXPECT_EQ(parse_gtp_vertex("I5", 9), -1);
  EXPECT_EQ(parse_gtp_vertex("A10", 9), -1);
  EXPECT_EQ(parse_gtp_vertex("T19", 19), 18);
  for (int m = 0; m <= 81; ++m) EXPECT_EQ(parse_gtp_vertex(gtp_vertex(m, 9), 9), m);
}

TEST(GoBoard, IncrementalGroupsMatchARecountOverRandomGames) {
  Rng r{7, 0};
  std::vector<int> scratch;
  for (int game = 0; game < 40; ++game) {
    GoBoard b = new_board(game % 2 ? 9 : 7);
    for (int ply = 0; ply < 400 && !game_over(b); ++ply) {
      play(b, random_playout_move(b, r, scratch));
      ASSERT_NO_FATAL_FAILURE(expect_groups_consistent(b)) << "game " << game << " ply " << ply;
    }
  }
}

TEST(GoGame, SgfAndSerializationRoundTrip) {
  Rng r{3, 0};
  std::vector<int> scratch;
  GoGame g;
  GoBoard b = new_board(9);
  while (!game_over(b) && b.moves < 300) {
    const int m = random_playout_move(b, r, scratch);
    play(b, m);
    g.moves.push_back(m);
  }
  g.result = "B+3.5";
  g.black = "minigo [gen 3]";
  g.white = "gnugo";
  const GoGame back = from_sgf(to_sgf(g));
  EXPECT_EQ(back.moves, g.moves);
  EXPECT_EQ(back.result, g.result);
  EXPECT_EQ(back.black, g.black);
  EXPECT_EQ(replay(back).stones, b.stones);
  const GoGame bytes = from_bytes<GoGame>(to_bytes(g));
  EXPECT_EQ(bytes.moves, g.moves);
  EXPECT_EQ(bytes.komi, g.komi);
  EXPECT_THROW(from_sgf("(;GM[1]SZ[9];B[ee];B[dd])"), std::invalid_argument);  // two black moves
  EXPECT_THROW(from_sgf("(;GM[1]SZ[9]AB[aa];W[bb])"), std::invalid_argument);    // setup stones
  EXPECT_THROW(from_sgf("(;GM[1]SZ[9];B[ee](;W[dd]))"), std::invalid_argument);  // a variation
  EXPECT_THROW(from_sgf("(;GM[1]SZ[9];B[ee];W[ee])"), std::invalid_argument);    // occupied
}

TEST(GoBoard, PlayoutSpeedReport) {
  Rng r{5, 0};
  std::vector<int> scratch;
  const auto t0 = std::chrono::steady_clock::now();
  int games = 0;
  long moves = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500)) {
    GoBoard b = new_board(9);
    while (!game_over(b) && b.moves < 400) play(b, random_playout_move(b, r, scratch));
    ++games;
    moves += b.moves;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("random 9x9 playouts: %.0f games/s, %.0f moves/s\n", games / s, double(moves) / s);
}
