// The minimum self-play games per generation, per scale: a row of the rules table and the value
// of min_selfplay_games_per_generation in the log (MLPerf v0.7 closed_minigo.yaml: 8192).
#pragma once
#include <string>

namespace mlpd {

inline constexpr int kMinigoReferenceMinGames = 8192;
inline constexpr int kMinigoMiniMinGames = 32;
// The reference opponent (a rollout MCTS) and the evaluation define the target: fixed per scale.
inline constexpr int kMinigoMiniReferenceReadouts = 32;
inline constexpr int kMinigoReferenceReferenceReadouts = 800;
inline constexpr int kMinigoMiniEvalGames = 40;
inline constexpr int kMinigoReferenceEvalGames = 100;

inline int minigo_min_games(const std::string& scale) {
  return scale == "reference" ? kMinigoReferenceMinGames : kMinigoMiniMinGames;
}

}  // namespace mlpd
