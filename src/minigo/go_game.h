// A game record: what self-play sends between ranks (Boost.Serialization, core/serialize.h) and
// what SGF files hold.
#pragma once
#include <string>
#include <vector>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include "minigo/go_board.h"

namespace mlpd {

struct GoGame {
  int size = 9;
  double komi = 7.5;
  std::vector<int> moves;  // points, pass = size*size
  std::string result;      // "B+3.5", "W+R", "0", or "" while unfinished
  std::string black, white;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & size & komi & moves & result & black & white;
  }
};

// The board after every move (std::invalid_argument on an illegal one).
GoBoard replay(const GoGame& g);
// SGF FF[4] with GM SZ KM RE PB PW and the moves (a pass as an empty value).
std::string to_sgf(const GoGame& g);
// The same subset back; std::invalid_argument naming the byte offset on anything else (setup
// stones, variations) or an illegal move.
GoGame from_sgf(const std::string& sgf);

}  // namespace mlpd
