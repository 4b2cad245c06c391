#include "minigo/selfplay.h"

#include <cstdio>

#include "core/check.h"
#include "core/rng.h"
#include "minigo/features.h"

namespace mlpd {

namespace {

constexpr uint64_t kResignStream = 0x5245'5349'474E'0000ull;  // "RESIGN"

}  // namespace

std::string result_text(double score) {
  if (score == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%c+%g", score > 0 ? 'B' : 'W', score > 0 ? score : -score);
  return buf;
}

GameRecord self_play_game(const MctsEvaluator& eval, const SelfPlayConfig& cfg, int size, double komi, uint64_t seed,
                          uint64_t game_index) {
  GameRecord r;
  r.game.size = size;
  r.game.komi = komi;
  r.resignation_disabled = rng_uniform(seed, kResignStream, game_index) < cfg.no_resign_fraction;
  const int max_moves = cfg.max_moves > 0 ? cfg.max_moves : 2 * size * size;
  GoBoard b = new_board(size);
  std::vector<std::vector<int8_t>> earlier;  // most recent first
  const uint64_t game_seed = rng_u64(seed, 0x53454C46ull, game_index);
  while (!game_over(b) && b.moves < max_moves) {
    auto tree = mcts_new(b, earlier);
    mcts_search(*tree, cfg.mcts, eval, true, game_seed);
    const std::vector<int> visits = mcts_root_visits(*tree);
    if (!r.resignation_disabled && mcts_root_value(*tree) < cfg.resign_threshold) {
      r.game.result = b.to_play == kBlack ? "W+R" : "B+R";
      return r;
    }
    const int m = mcts_choose(visits, b.moves < cfg.temperature_moves, game_seed, uint64_t(b.moves));
    r.visits.emplace_back(visits.begin(), visits.end());
    r.game.moves.push_back(m);
    earlier.insert(earlier.begin(), b.stones);
    if (earlier.size() > kFeatureHistory) earlier.pop_back();
    play(b, m);
  }
  r.game.result = result_text(tromp_taylor_score(b, komi));
  return r;
}

std::vector<TrainingExample> training_examples(const GameRecord& r) {
  const GoGame& g = r.game;
  MLPD_CHECK(r.visits.size() == g.moves.size(), "game record: one visit vector per move");
  MLPD_CHECK(!g.result.empty() && (g.result[0] == 'B' || g.result[0] == 'W' || g.result == "0"),
             "game record without a result");
  const float black_outcome = g.result[0] == 'B' ? 1.0f : g.result[0] == 'W' ? -1.0f : 0.0f;
  std::vector<TrainingExample> out;
  GoBoard b = new_board(g.size);
  std::vector<std::vector<int8_t>> seen;  // most recent first, the current one included
  const int cells = g.size * g.size;
  for (size_t i = 0; i < g.moves.size(); ++i) {
    seen.insert(seen.begin(), b.stones);
    if (seen.size() > kFeatureHistory) seen.pop_back();
    TrainingExample e;
    e.features.resize(size_t(cells) * kFeaturePlanes);
    std::vector<const std::vector<int8_t>*> positions;
    for (const auto& s : seen) positions.push_back(&s);
    board_features(positions, g.size, b.to_play, e.features.data());
    double total = 0;
    for (uint16_t v : r.visits[i]) total += v;
    e.policy.resize(size_t(cells) + 1);
    for (int m = 0; m <= cells; ++m) e.policy[size_t(m)] = total > 0 ? float(r.visits[i][size_t(m)] / total) : 0.0f;
    e.outcome = b.to_play == kBlack ? black_outcome : -black_outcome;
    out.push_back(std::move(e));
    play(b, g.moves[i]);
  }
  return out;
}

namespace {

// Where point (r, c) goes under symmetry s.
int map_point(int s, int size, int r, int c) {
  const int n = size - 1;
  int rr = r, cc = c;
  switch (s & 3) {
    case 0: rr = r, cc = c; break;
    case 1: rr = c, cc = n - r; break;      // rotate 90
    case 2: rr = n - r, cc = n - c; break;  // rotate 180
    default: rr = n - c, cc = r; break;     // rotate 270
  }
  if (s >= 4) cc = n - cc;  // then reflect left-right
  return rr * size + cc;
}

}  // namespace

int inverse_symmetry(int s) { return s == 1 ? 3 : s == 3 ? 1 : s; }

void apply_symmetry(int s, int size, const TrainingExample& in, TrainingExample& out) {
  const int cells = size * size;
  out.features.assign(in.features.size(), 0.0f);
  out.policy.assign(in.policy.size(), 0.0f);
  out.outcome = in.outcome;
  for (int r = 0; r < size; ++r)
    for (int c = 0; c < size; ++c) {
      const int from = r * size + c, to = map_point(s, size, r, c);
      for (int k = 0; k < kFeaturePlanes; ++k)
        out.features[size_t(to) * kFeaturePlanes + size_t(k)] = in.features[size_t(from) * kFeaturePlanes + size_t(k)];
      out.policy[size_t(to)] = in.policy[size_t(from)];
    }
  out.policy[size_t(cells)] = in.policy[size_t(cells)];
}

}  // namespace mlpd
