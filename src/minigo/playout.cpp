#include "minigo/playout.h"

#include "core/check.h"

namespace mlpd {

int random_playout_move(const GoBoard& b, Rng& r, std::vector<int>& scratch) {
  legal_moves(b, scratch);
  scratch.pop_back();  // the pass
  while (!scratch.empty()) {
    const size_t i = size_t(r.next_u64() % scratch.size());
    const int m = scratch[i];
    if (!is_eye_like(b, m, b.to_play)) return m;
    scratch[i] = scratch.back();
    scratch.pop_back();
  }
  return pass_move(b.size);
}

double random_playout(GoBoard b, Rng& r, int max_moves, double komi, std::vector<int>& scratch) {
  for (int k = 0; k < max_moves && !game_over(b); ++k) play(b, random_playout_move(b, r, scratch));
  return tromp_taylor_score(b, komi);
}

// Stones placed one by one, the colours alternating (a pass where one colour has none left). No
// placement captures or is suicide: a group of a legal position keeps a liberty that stays empty
// while its stones are placed, so every partial group has one too.
GoBoard board_from_stones(int size, const std::vector<int8_t>& stones, int8_t to_play) {
  MLPD_CHECK(stones.size() == size_t(size) * size, "board_from_stones: one entry per point");
  std::vector<int> black, white;
  for (int p = 0; p < size * size; ++p) {
    if (stones[size_t(p)] == kBlack) black.push_back(p);
    else if (stones[size_t(p)] == kWhite) white.push_back(p);
  }
  GoBoard b = new_board(size);
  size_t nb = 0, nw = 0;
  while (nb < black.size() || nw < white.size()) {
    std::vector<int>& mine = b.to_play == kBlack ? black : white;
    size_t& next = b.to_play == kBlack ? nb : nw;
    const int m = next < mine.size() ? mine[next++] : pass_move(size);
    MLPD_CHECK(m == pass_move(size) || is_legal(b, m), "board_from_stones: a group without a liberty");
    play(b, m);
  }
  if (b.to_play != to_play) play(b, pass_move(size));
  b.passes = 0;
  b.moves = 0;
  b.history.clear();
  return b;
}

}  // namespace mlpd
