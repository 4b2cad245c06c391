#include "minigo/features.h"

#include <algorithm>

namespace mlpd {

void board_features(const std::vector<const std::vector<int8_t>*>& positions, int size, int8_t to_play, float* out) {
  const int n = size * size;
  std::fill(out, out + size_t(n) * kFeaturePlanes, 0.0f);
  const int have = std::min<int>(kFeatureHistory, int(positions.size()));
  for (int t = 0; t < have; ++t) {
    const std::vector<int8_t>& s = *positions[size_t(t)];
    for (int p = 0; p < n; ++p) {
      if (s[size_t(p)] == to_play) out[size_t(p) * kFeaturePlanes + size_t(2 * t)] = 1.0f;
      else if (s[size_t(p)] == -to_play) out[size_t(p) * kFeaturePlanes + size_t(2 * t + 1)] = 1.0f;
    }
  }
  if (to_play == kBlack)
    for (int p = 0; p < n; ++p) out[size_t(p) * kFeaturePlanes + 2 * kFeatureHistory] = 1.0f;
}

}  // namespace mlpd
