#include "minigo/go_game.h"

#include <cctype>
#include <cstdio>
#include <stdexcept>

namespace mlpd {

GoBoard replay(const GoGame& g) {
  GoBoard b = new_board(g.size);
  for (int m : g.moves) play(b, m);
  return b;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string sgf_point(int move, int size) {
  if (move == pass_move(size)) return "";
  return {char('a' + move % size), char('a' + move / size)};
}

}  // namespace

std::string to_sgf(const GoGame& g) {
  char komi[32];
  std::snprintf(komi, sizeof komi, "%g", g.komi);
  std::string s = "(;GM[1]FF[4]SZ[" + std::to_string(g.size) + "]KM[" + komi + "]";
  if (!g.result.empty()) s += "RE[" + escape(g.result) + "]";
  if (!g.black.empty()) s += "PB[" + escape(g.black) + "]";
  if (!g.white.empty()) s += "PW[" + escape(g.white) + "]";
  for (size_t i = 0; i < g.moves.size(); ++i)
    s += std::string(";") + (i % 2 == 0 ? "B" : "W") + "[" + sgf_point(g.moves[i], g.size) + "]";
  return s + ")\n";
}

GoGame from_sgf(const std::string& sgf) {
  GoGame g;
  size_t p = 0;
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("SGF at byte " + std::to_string(p) + ": " + why);
  };
  auto skip_space = [&] {
    while (p < sgf.size() && std::isspace(static_cast<unsigned char>(sgf[p]))) ++p;
  };
  skip_space();
  if (p >= sgf.size() || sgf[p] != '(') fail("expected '('");
  ++p;
  bool size_seen = false, moved = false;
  GoBoard b = new_board(9);
  int8_t expect = kBlack;
  for (;;) {
    skip_space();
    if (p >= sgf.size()) fail("unterminated game tree");
    if (sgf[p] == ')') break;
    if (sgf[p] == '(') fail("variations are not supported");
    if (sgf[p] == ';') {
      ++p;
      continue;
    }
    std::string id;
    while (p < sgf.size() && std::isupper(static_cast<unsigned char>(sgf[p]))) id += sgf[p++];
    if (id.empty()) fail("expected a property");
    skip_space();
    std::vector<std::string> values;
    while (p < sgf.size() && sgf[p] == '[') {
      ++p;
      std::string v;
      while (p < sgf.size() && sgf[p] != ']') {
        if (sgf[p] == '\\' && p + 1 < sgf.size()) ++p;
        v += sgf[p++];
      }
      if (p >= sgf.size()) fail("unterminated value");
      ++p;
      values.push_back(v);
      skip_space();
    }
    if (values.empty()) fail("property " + id + " without a value");
    const std::string& v = values[0];
    if (id == "GM") {
      if (v != "1") fail("not a game of Go (GM[" + v + "])");
    } else if (id == "FF" || id == "C" || id == "CA" || id == "AP") {
    } else if (id == "SZ") {
      if (moved) fail("SZ after the moves");
      try {
        g.size = std::stoi(v);
        b = new_board(g.size);
      } catch (const std::exception&) {
        fail("bad board size " + v);
      }
      size_seen = true;
    } else if (id == "KM") {
      try {
        g.komi = std::stod(v);
      } catch (const std::exception&) {
        fail("bad komi " + v);
      }
    } else if (id == "RE") {
      g.result = v;
    } else if (id == "PB") {
      g.black = v;
    } else if (id == "PW") {
      g.white = v;
    } else if (id == "B" || id == "W") {
      const int8_t color = id == "B" ? kBlack : kWhite;
      if (color != expect) fail("two moves in a row by " + id);
      int move = pass_move(g.size);
      if (!v.empty() && !(v == "tt" && g.size <= 19)) {
        if (v.size() != 2 || v[0] < 'a' || v[1] < 'a' || v[0] - 'a' >= g.size || v[1] - 'a' >= g.size)
          fail("bad point " + v);
        move = (v[1] - 'a') * g.size + (v[0] - 'a');
      }
      if (!is_legal(b, move)) fail("illegal move " + id + "[" + v + "]");
      play(b, move);
      g.moves.push_back(move);
      expect = int8_t(-expect);
      moved = true;
    } else {
      fail("unsupported property " + id);
    }
  }
  (void)size_seen;
  return g;
}

}  // namespace mlpd
