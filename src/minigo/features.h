// MiniGo's input planes for one position: for each of the last 8 positions (the current one first)
// a plane of the side to move's stones and one of the opponent's, then a plane of 1s when black is
// to move: 17 planes, NHWC [size, size, 17].
#pragma once
#include <cstdint>
#include <vector>

#include "minigo/go_board.h"

namespace mlpd {

inline constexpr int kFeatureHistory = 8;
inline constexpr int kFeaturePlanes = 2 * kFeatureHistory + 1;

// positions: the stones of the current position and the ones before it, most recent first (fewer
// than 8 at the start of a game: the missing ones are empty boards). to_play: the side to move.
void board_features(const std::vector<const std::vector<int8_t>*>& positions, int size, int8_t to_play, float* out);

}  // namespace mlpd
