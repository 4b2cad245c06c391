#include "detection/resize.h"

#include <algorithm>
#include <cmath>

namespace mlpd {

std::vector<uint8_t> resize_bilinear_u8(const uint8_t* src, int sh, int sw, int c, int h, int w) {
  std::vector<uint8_t> out(size_t(h) * size_t(w) * size_t(c));
  for (int y = 0; y < h; ++y) {
    const double fy = std::clamp((y + 0.5) * sh / h - 0.5, 0.0, double(sh - 1));
    const int y0 = int(fy), y1 = std::min(y0 + 1, sh - 1);
    const double ay = fy - y0;
    for (int x = 0; x < w; ++x) {
      const double fx = std::clamp((x + 0.5) * sw / w - 0.5, 0.0, double(sw - 1));
      const int x0 = int(fx), x1 = std::min(x0 + 1, sw - 1);
      const double ax = fx - x0;
      for (int k = 0; k < c; ++k) {
        auto p = [&](int yy, int xx) { return double(src[(size_t(yy) * size_t(sw) + size_t(xx)) * size_t(c) + size_t(k)]); };
        const double v = (1 - ay) * ((1 - ax) * p(y0, x0) + ax * p(y0, x1)) + ay * ((1 - ax) * p(y1, x0) + ax * p(y1, x1));
        out[(size_t(y) * size_t(w) + size_t(x)) * size_t(c) + size_t(k)] = uint8_t(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
  return out;
}

}  // namespace mlpd
