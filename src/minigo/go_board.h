// The game of Go for minigo: boards of 5x5 to 19x19, captures, suicide forbidden, positional
// superko, passes, and area (Tromp-Taylor) scoring. Groups are kept as circular stone lists with
// pseudo-liberty counts (each stone-empty adjacency counted once per stone), which is all that
// capture and suicide need: a group is dead exactly when its pseudo-liberties reach 0.
// A board is a value (a few KB with its position history): MCTS copies one per simulation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

inline constexpr int8_t kBlack = 1, kWhite = -1, kEmpty = 0;

struct GoBoard {
  int size = 9;
  std::vector<int8_t> stones;     // [size*size], point = row*size + col, row 0 the top (GTP row `size`)
  std::vector<int16_t> group;     // a stone's group id (the group's first stone), -1 on empty points
  std::vector<int16_t> next;      // circular list of the stones of one group
  std::vector<int16_t> pseudo;    // per group id: stone-empty adjacencies
  std::vector<int16_t> count;     // per group id: stones
  int8_t to_play = kBlack;
  int passes = 0;                 // consecutive
  int moves = 0;
  int captured[2] = {0, 0};       // stones captured by black, by white
  uint64_t hash = 0;              // Zobrist hash of the stones
  std::vector<uint64_t> history;  // hashes of every earlier position of the game (positional superko)
};

inline int pass_move(int size) { return size * size; }

GoBoard new_board(int size);
// Pass is always legal; else the point must be empty, not suicide, and not repeat a position.
bool is_legal(const GoBoard& b, int move);
// Plays a legal move for b.to_play; std::invalid_argument if it is not legal.
void play(GoBoard& b, int move);
void legal_moves(const GoBoard& b, std::vector<int>& out);  // the pass included, last
bool game_over(const GoBoard& b);                            // two passes in a row
// Area scoring: stones plus empty regions that reach only one colour; black - white - komi.
double tromp_taylor_score(const GoBoard& b, double komi);
// Every orthogonal neighbour is `color` (or off the board) and the diagonals hold at most one
// enemy stone (none on the edge): filling it would be a wasted move in a random playout.
bool is_eye_like(const GoBoard& b, int point, int8_t color);
// "D4"-style vertex (columns A..T without I, rows from the bottom) or "pass"; -1 for junk.
std::string gtp_vertex(int move, int size);
int parse_gtp_vertex(const std::string& v, int size);
std::string board_to_string(const GoBoard& b);

}  // namespace mlpd
