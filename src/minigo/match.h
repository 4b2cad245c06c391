// Games between two players, for minigo's evaluation: the trained network (MCTS over it, no noise,
// most visits) against a fixed reference opponent, and against GNU Go for a strength figure.
// The reference opponent is a fixed MCTS baseline: the same search over random playouts (classic
// Monte Carlo Go, uniform priors), so it needs no trained checkpoint and is the same everywhere.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "minigo/go_game.h"
#include "minigo/gtp_client.h"
#include "minigo/mcts.h"

namespace mlpd {

inline constexpr int kResignMove = -2;  // what a player returns to resign

// A player: told a new game starts, then asked for moves. `game` holds every move so far (the
// opponent's last move included); `b` is the position after them; `earlier` the positions before
// it, most recent first (the last 8 at most: what the features read).
struct GoPlayer {
  std::string name;
  std::function<void(int size, double komi, uint64_t game_seed)> new_game;
  std::function<int(const GoGame& game, const GoBoard& b, const std::vector<std::vector<int8_t>>& earlier)> choose;
  // Optional: the engine's own score of the finished game, black's margin. GNU Go removes the
  // stones it judges dead; Tromp-Taylor counts every stone left on the board, so a game against an
  // engine that passes with dead stones on the board is scored by the engine.
  std::function<double(const GoGame& game)> final_score;
};

// MCTS with cfg.simulations per move over `eval`, no root noise; the first `opening_moves` moves of
// the game drawn in proportion to visits (from the game's seed: evaluation games differ), then the
// most visited move.
GoPlayer mcts_player(std::string name, MctsEvaluator eval, MctsConfig cfg, int opening_moves);
// "B+12.5" -> 12.5, "W+3.5" -> -3.5, "0" -> 0 (GTP's final_score); std::runtime_error otherwise.
double parse_final_score(const std::string& s);
// Classic Monte Carlo values: uniform priors, jittered by 1% so that the search tries the moves in
// a random order (equal priors would always try the top row first); the value of a position is the
// outcome (+1/-1 for the side to move) of `playouts` random playouts from it (minigo/playout.h).
// Deterministic: the playouts' random numbers come from the position and `seed`.
MctsEvaluator rollout_evaluator(int size, double komi, int playouts, uint64_t seed);
// A random legal move that does not fill its own eye (the pass when none is left), from the game's seed.
GoPlayer random_player();
// GNU Go over GTP (one engine process for the player's lifetime; the board is cleared each game).
GoPlayer gnugo_player(int level, double komi, int size);

struct MatchGame {
  GoGame game;       // moves and result ("B+R" when one resigns)
  double black_margin = 0;  // black's area margin: the engine's final_score where a player has one, else
                            // Tromp-Taylor (0 after a resignation)
};
// One game from the empty board; ends at two passes, a resignation, or max_moves (then scored).
MatchGame play_match_game(GoPlayer& black, GoPlayer& white, int size, double komi, int max_moves, uint64_t game_seed);

}  // namespace mlpd
