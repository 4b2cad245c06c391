#include "minigo/go_board.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include "core/rng.h"

namespace mlpd {

namespace {

constexpr const char* kColumns = "ABCDEFGHJKLMNOPQRST";

// Zobrist keys: a fixed function of (point, colour), the same in every process.
uint64_t zobrist(int point, int8_t color) {
  return rng_u64(0x5A4F4252495354ull, uint64_t(color == kBlack ? 1 : 2), uint64_t(point));
}

// The up-to-4 orthogonal neighbours of p; returns how many.
int neighbours(int size, int p, int out[4]) {
  const int r = p / size, c = p % size;
  int k = 0;
  if (r > 0) out[k++] = p - size;
  if (r + 1 < size) out[k++] = p + size;
  if (c > 0) out[k++] = p - 1;
  if (c + 1 < size) out[k++] = p + 1;
  return k;
}

// Distinct neighbouring groups of colour `color` of point p, and how many of p's sides each touches.
struct Touch {
  int ids[4];
  int sides[4];
  int n = 0;
  void add(int id) {
    for (int i = 0; i < n; ++i)
      if (ids[i] == id) {
        ++sides[i];
        return;
      }
    ids[n] = id;
    sides[n] = 1;
    ++n;
  }
};

Touch touching(const GoBoard& b, int p, int8_t color) {
  Touch t;
  int nb[4];
  const int k = neighbours(b.size, p, nb);
  for (int i = 0; i < k; ++i)
    if (b.stones[size_t(nb[i])] == color) t.add(b.group[size_t(nb[i])]);
  return t;
}

}  // namespace

GoBoard new_board(int size) {
  if (size < 5 || size > 19) throw std::invalid_argument("board size " + std::to_string(size) + " outside 5..19");
  GoBoard b;
  b.size = size;
  const size_t n = size_t(size) * size;
  b.stones.assign(n, kEmpty);
  b.group.assign(n, -1);
  b.next.resize(n);
  for (size_t i = 0; i < n; ++i) b.next[i] = int16_t(i);
  b.pseudo.assign(n, 0);
  b.count.assign(n, 0);
  return b;
}

namespace {

// The hash after `move` by `color`, with the groups it captures removed.
uint64_t hash_after(const GoBoard& b, int move, int8_t color) {
  uint64_t h = b.hash ^ zobrist(move, color);
  const Touch enemies = touching(b, move, int8_t(-color));
  for (int i = 0; i < enemies.n; ++i) {
    const int id = enemies.ids[i];
    if (b.pseudo[size_t(id)] != enemies.sides[i]) continue;
    int s = id;
    do {
      h ^= zobrist(s, int8_t(-color));
      s = b.next[size_t(s)];
    } while (s != id);
  }
  return h;
}

bool is_suicide(const GoBoard& b, int move, int8_t color) {
  int nb[4];
  const int k = neighbours(b.size, move, nb);
  for (int i = 0; i < k; ++i)
    if (b.stones[size_t(nb[i])] == kEmpty) return false;
  const Touch friends = touching(b, move, color);
  for (int i = 0; i < friends.n; ++i)
    if (b.pseudo[size_t(friends.ids[i])] > friends.sides[i]) return false;  // a liberty elsewhere
  const Touch enemies = touching(b, move, int8_t(-color));
  for (int i = 0; i < enemies.n; ++i)
    if (b.pseudo[size_t(enemies.ids[i])] == enemies.sides[i]) return false;  // captures
  return true;
}

// Takes group `id` off the board, giving its neighbours back their pseudo-liberties.
void capture(GoBoard& b, int id) {
  std::array<int16_t, 361> pts{};
  int n = 0;
  int s = id;
  do {
    pts[size_t(n++)] = int16_t(s);
    s = b.next[size_t(s)];
  } while (s != id);
  const int8_t color = b.stones[size_t(id)];
  for (int i = 0; i < n; ++i) {
    const int p = pts[size_t(i)];
    b.hash ^= zobrist(p, color);
    b.stones[size_t(p)] = kEmpty;
    b.group[size_t(p)] = -1;
    b.next[size_t(p)] = int16_t(p);
  }
  b.pseudo[size_t(id)] = 0;
  b.count[size_t(id)] = 0;
  for (int i = 0; i < n; ++i) {
    int nb[4];
    const int k = neighbours(b.size, pts[size_t(i)], nb);
    for (int j = 0; j < k; ++j)
      if (b.stones[size_t(nb[j])] != kEmpty) ++b.pseudo[size_t(b.group[size_t(nb[j])])];
  }
  b.captured[color == kWhite ? 0 : 1] += n;
}

// Joins group `from` into group `into`.
void merge(GoBoard& b, int into, int from) {
  int s = from;
  do {
    b.group[size_t(s)] = int16_t(into);
    s = b.next[size_t(s)];
  } while (s != from);
  std::swap(b.next[size_t(into)], b.next[size_t(from)]);  // splice the two circular lists
  b.pseudo[size_t(into)] = int16_t(b.pseudo[size_t(into)] + b.pseudo[size_t(from)]);
  b.count[size_t(into)] = int16_t(b.count[size_t(into)] + b.count[size_t(from)]);
  b.pseudo[size_t(from)] = 0;
  b.count[size_t(from)] = 0;
}

}  // namespace

bool is_legal(const GoBoard& b, int move) {
  const int n = b.size * b.size;
  if (move == n) return true;
  if (move < 0 || move > n || b.stones[size_t(move)] != kEmpty) return false;
  if (is_suicide(b, move, b.to_play)) return false;
  const uint64_t h = hash_after(b, move, b.to_play);
  return h != b.hash && std::find(b.history.begin(), b.history.end(), h) == b.history.end();
}

void play(GoBoard& b, int move) {
  if (!is_legal(b, move))
    throw std::invalid_argument("illegal move " + gtp_vertex(move, b.size) + " for " +
                                (b.to_play == kBlack ? "black" : "white"));
  const int8_t color = b.to_play;
  b.history.push_back(b.hash);
  ++b.moves;
  b.to_play = int8_t(-color);
  if (move == pass_move(b.size)) {
    ++b.passes;
    return;
  }
  b.passes = 0;
  b.stones[size_t(move)] = color;
  b.group[size_t(move)] = int16_t(move);
  b.next[size_t(move)] = int16_t(move);
  b.count[size_t(move)] = 1;
  b.hash ^= zobrist(move, color);
  int nb[4];
  const int k = neighbours(b.size, move, nb);
  int16_t libs = 0;
  for (int i = 0; i < k; ++i) {
    if (b.stones[size_t(nb[i])] == kEmpty) {
      ++libs;
    } else {
      --b.pseudo[size_t(b.group[size_t(nb[i])])];  // the new stone takes this adjacency
    }
  }
  b.pseudo[size_t(move)] = libs;
  for (int i = 0; i < k; ++i) {
    const int q = nb[i];
    if (b.stones[size_t(q)] == color && b.group[size_t(q)] != b.group[size_t(move)])
      merge(b, b.group[size_t(move)], b.group[size_t(q)]);
  }
  for (int i = 0; i < k; ++i) {
    const int q = nb[i];
    if (b.stones[size_t(q)] == -color && b.pseudo[size_t(b.group[size_t(q)])] == 0) capture(b, b.group[size_t(q)]);
  }
}

void legal_moves(const GoBoard& b, std::vector<int>& out) {
  out.clear();
  const int n = b.size * b.size;
  for (int p = 0; p < n; ++p)
    if (b.stones[size_t(p)] == kEmpty && is_legal(b, p)) out.push_back(p);
  out.push_back(n);
}

bool game_over(const GoBoard& b) { return b.passes >= 2; }

double tromp_taylor_score(const GoBoard& b, double komi) {
  const int n = b.size * b.size;
  int black = 0, white = 0;
  std::vector<uint8_t> seen(size_t(n), 0);
  std::vector<int> stack, region;
  for (int p = 0; p < n; ++p) {
    if (b.stones[size_t(p)] == kBlack) ++black;
    if (b.stones[size_t(p)] == kWhite) ++white;
    if (b.stones[size_t(p)] != kEmpty || seen[size_t(p)]) continue;
    bool reaches_black = false, reaches_white = false;
    region.clear();
    stack.assign(1, p);
    seen[size_t(p)] = 1;
    while (!stack.empty()) {
      const int q = stack.back();
      stack.pop_back();
      region.push_back(q);
      int nb[4];
      const int k = neighbours(b.size, q, nb);
      for (int i = 0; i < k; ++i) {
        const int8_t s = b.stones[size_t(nb[i])];
        if (s == kBlack) reaches_black = true;
        else if (s == kWhite) reaches_white = true;
        else if (!seen[size_t(nb[i])]) {
          seen[size_t(nb[i])] = 1;
          stack.push_back(nb[i]);
        }
      }
    }
    if (reaches_black && !reaches_white) black += int(region.size());
    if (reaches_white && !reaches_black) white += int(region.size());
  }
  return double(black - white) - komi;
}

bool is_eye_like(const GoBoard& b, int p, int8_t color) {
  if (b.stones[size_t(p)] != kEmpty) return false;
  int nb[4];
  const int k = neighbours(b.size, p, nb);
  for (int i = 0; i < k; ++i)
    if (b.stones[size_t(nb[i])] != color) return false;
  const int r = p / b.size, c = p % b.size;
  int enemies = 0, diagonals = 0;
  for (int dr : {-1, 1})
    for (int dc : {-1, 1}) {
      const int rr = r + dr, cc = c + dc;
      if (rr < 0 || cc < 0 || rr >= b.size || cc >= b.size) continue;
      ++diagonals;
      if (b.stones[size_t(rr * b.size + cc)] == -color) ++enemies;
    }
  return diagonals == 4 ? enemies <= 1 : enemies == 0;
}

std::string gtp_vertex(int move, int size) {
  if (move == pass_move(size)) return "pass";
  if (move < 0 || move > pass_move(size)) return "?";
  const int r = move / size, c = move % size;
  std::string v(1, kColumns[c]);
  v += std::to_string(size - r);
  return v;
}

int parse_gtp_vertex(const std::string& v, int size) {
  std::string s;
  for (char ch : v) s.push_back(char(std::toupper(static_cast<unsigned char>(ch))));
  if (s == "PASS") return pass_move(size);
  if (s.size() < 2 || s.size() > 3) return -1;
  const char* col = std::char_traits<char>::find(kColumns, size_t(size), s[0]);
  if (!col) return -1;
  int row = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
    row = row * 10 + (s[i] - '0');
  }
  if (row < 1 || row > size) return -1;
  return (size - row) * size + int(col - kColumns);
}

std::string board_to_string(const GoBoard& b) {
  std::string out;
  for (int r = 0; r < b.size; ++r) {
    for (int c = 0; c < b.size; ++c) {
      const int8_t s = b.stones[size_t(r * b.size + c)];
      out += s == kBlack ? 'X' : s == kWhite ? 'O' : '.';
    }
    out += '\n';
  }
  return out;
}

}  // namespace mlpd
