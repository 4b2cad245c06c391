// Random playouts, the knowledge of minigo's reference opponent (classic Monte Carlo Go): a
// random legal move that does not fill the mover's own eye, games played out with it, and a board
// rebuilt from the stones of the feature planes so that an evaluator can play out a position.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "minigo/go_board.h"

namespace mlpd {

// A random legal move that does not fill the mover's own eye-like point; the pass when none is left.
int random_playout_move(const GoBoard& b, Rng& r, std::vector<int>& scratch);
// Plays random_playout_move from `b` until two passes or `max_moves` more moves; the Tromp-Taylor
// margin for black of the end position.
double random_playout(GoBoard b, Rng& r, int max_moves, double komi, std::vector<int>& scratch);
// A board with these stones (kBlack/kWhite/kEmpty per point; every group must have a liberty) and
// `to_play` to move, no passes, no history (superko starts from here).
GoBoard board_from_stones(int size, const std::vector<int8_t>& stones, int8_t to_play);

}  // namespace mlpd
