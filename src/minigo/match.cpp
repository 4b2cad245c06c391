#include "minigo/match.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/check.h"
#include "core/rng.h"
#include "minigo/features.h"
#include "minigo/playout.h"
#include "minigo/selfplay.h"

namespace mlpd {

GoPlayer mcts_player(std::string name, MctsEvaluator eval, MctsConfig cfg, int opening_moves) {
  GoPlayer p;
  p.name = std::move(name);
  auto seed = std::make_shared<uint64_t>(0);
  p.new_game = [seed](int, double, uint64_t game_seed) { *seed = game_seed; };
  p.choose = [eval = std::move(eval), cfg, opening_moves, seed](const GoGame&, const GoBoard& b,
                                                                const std::vector<std::vector<int8_t>>& earlier) {
    auto tree = mcts_new(b, earlier);
    mcts_search(*tree, cfg, eval, false, *seed);
    return mcts_choose(mcts_root_visits(*tree), b.moves < opening_moves, *seed, uint64_t(b.moves));
  };
  return p;
}

namespace {

// Priors equal up to a small jitter drawn from the position (hash h): PUCT then tries the moves
// in a random order instead of the board's (equal priors always try the top row first).
void jittered_uniform(uint64_t h, int moves, float* policy) {
  double sum = 0;
  for (int m = 0; m < moves; ++m) sum += policy[m] = 1.0f + 0.01f * rng_uniform(h, uint64_t(m), 0);
  for (int m = 0; m < moves; ++m) policy[m] = float(policy[m] / sum);
}

uint64_t position_hash(const float* f, size_t plane) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < plane; k += kFeaturePlanes) h = (h ^ uint64_t(f[k] + 2 * f[k + 1])) * 0x100000001b3ull;
  return h ^ uint64_t(f[2 * kFeatureHistory]);
}

}  // namespace

MctsEvaluator rollout_evaluator(int size, double komi, int playouts, uint64_t seed) {
  return [size, komi, playouts, seed](int n, const float* features, float* policy, float* value) {
    const int moves = size * size + 1, points = size * size;
    const size_t plane = size_t(points) * kFeaturePlanes;
    std::vector<int8_t> stones(static_cast<size_t>(points), kEmpty);
    std::vector<int> scratch;
    for (int i = 0; i < n; ++i) {
      const float* f = features + plane * size_t(i);
      const uint64_t h = position_hash(f, plane);
      jittered_uniform(h, moves, policy + size_t(i) * moves);
      const int8_t to_play = f[2 * kFeatureHistory] > 0.5f ? kBlack : kWhite;
      for (int p = 0; p < points; ++p)
        stones[size_t(p)] = f[size_t(p) * kFeaturePlanes] > 0.5f ? to_play
                            : f[size_t(p) * kFeaturePlanes + 1] > 0.5f ? int8_t(-to_play)
                                                                         : kEmpty;
      const GoBoard b = board_from_stones(size, stones, to_play);
      Rng r{seed ^ h, 0x524F4C4Cull};
      double v = 0;
      for (int k = 0; k < playouts; ++k) {
        const double margin = random_playout(b, r, 3 * points, komi, scratch);
        v += (margin > 0) == (to_play == kBlack) ? 1.0 : -1.0;
      }
      value[i] = float(v / playouts);
    }
  };
}

GoPlayer random_player() {
  GoPlayer p;
  p.name = "random";
  auto seed = std::make_shared<uint64_t>(0);
  p.new_game = [seed](int, double, uint64_t game_seed) { *seed = game_seed; };
  p.choose = [seed](const GoGame&, const GoBoard& b, const std::vector<std::vector<int8_t>>&) {
    Rng r{*seed, uint64_t(b.moves)};
    std::vector<int> scratch;
    return random_playout_move(b, r, scratch);
  };
  return p;
}

double parse_final_score(const std::string& s) {
  if (s == "0") return 0.0;
  if (s.size() < 3 || (s[0] != 'B' && s[0] != 'W') || s[1] != '+')
  {
    std::string what = "GTP final_score: unexpected reply '";
    what += s;
    what += "'";
    throw std::runtime_error(what);
  }
  const double v = std::stod(s.substr(2));
  return s[0] == 'B' ? v : -v;
}

GoPlayer gnugo_player(int level, double komi, int size) {
  auto gtp = std::make_shared<GtpClient>(gnugo_command(level, komi, size));
  auto sent = std::make_shared<size_t>(0);
  GoPlayer p;
  p.name = "gnugo-level-";
  p.name += std::to_string(level);
  p.new_game = [gtp, sent](int sz, double k, uint64_t) {
    gtp->command("boardsize " + std::to_string(sz));
    gtp->command("clear_board");
    char buf[32];
    std::snprintf(buf, sizeof buf, "komi %g", k);
    gtp->command(buf);
    *sent = 0;
  };
  // Tells GNU Go the moves it has not seen (the opponent's).
  auto catch_up = [gtp, sent](const GoGame& g) {
    for (; *sent < g.moves.size(); ++*sent) {
      std::string line = *sent % 2 == 0 ? "play black " : "play white ";
      line += gtp_vertex(g.moves[*sent], g.size);
      gtp->command(line);
    }
  };
  p.final_score = [gtp, catch_up](const GoGame& g) {
    catch_up(g);
    return parse_final_score(gtp->command("final_score"));
  };
  p.choose = [gtp, sent, catch_up](const GoGame& g, const GoBoard& b, const std::vector<std::vector<int8_t>>&) {
    catch_up(g);
    const std::string reply = gtp->command(b.to_play == kBlack ? "genmove black" : "genmove white");
    ++*sent;  // its own move is on its board already
    std::string lower;
    for (char c : reply) lower += char(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "resign") return kResignMove;
    return parse_gtp_vertex(reply, g.size);
  };
  return p;
}

MatchGame play_match_game(GoPlayer& black, GoPlayer& white, int size, double komi, int max_moves, uint64_t game_seed) {
  MatchGame m;
  m.game.size = size;
  m.game.komi = komi;
  m.game.black = black.name;
  m.game.white = white.name;
  black.new_game(size, komi, game_seed);
  white.new_game(size, komi, game_seed ^ 0x5748495445ull);
  GoBoard b = new_board(size);
  std::vector<std::vector<int8_t>> earlier;
  while (!game_over(b) && b.moves < max_moves) {
    GoPlayer& p = b.to_play == kBlack ? black : white;
    const int move = p.choose(m.game, b, earlier);
    if (move == kResignMove) {
      m.game.result = b.to_play == kBlack ? "W+R" : "B+R";
      return m;
    }
    if (!is_legal(b, move)) {
      std::string what = p.name;
      what += " played an illegal move ";
      what += gtp_vertex(move, size);
      what += " at move ";
      what += std::to_string(b.moves + 1);
      throw std::runtime_error(what);
    }
    m.game.moves.push_back(move);
    earlier.insert(earlier.begin(), b.stones);
    if (earlier.size() > kFeatureHistory) earlier.pop_back();
    play(b, move);
  }
  if (black.final_score) m.black_margin = black.final_score(m.game);
  else if (white.final_score) m.black_margin = white.final_score(m.game);
  else m.black_margin = tromp_taylor_score(b, komi);
  m.game.result = result_text(m.black_margin);
  return m;
}

}  // namespace mlpd
