// Nearest 2x upsampling (kernels/op_signatures.inc: upsample_nearest2x_*): row copies of c floats.
#include <algorithm>
#include <cstddef>

#include "kernels/ops.h"

namespace mlpd {

void upsample_nearest2x_forward(const float* x, int n, int h, int w, int c, float* y) {
  const size_t C = size_t(c), W2 = size_t(2) * w;
  for (size_t row = 0; row < size_t(n) * h; ++row) {
    const float* src = x + row * w * C;
    float* top = y + row * 2 * W2 * C;
    for (size_t j = 0; j < W2; ++j) std::copy_n(src + (j / 2) * C, C, top + j * C);
    std::copy_n(top, W2 * C, top + W2 * C);
  }
}

void upsample_nearest2x_backward(const float* dy, int n, int h, int w, int c, float* dx) {
  const size_t C = size_t(c), W2 = size_t(2) * w;
  for (size_t row = 0; row < size_t(n) * h; ++row) {
    float* d = dx + row * w * C;
    const float* top = dy + row * 2 * W2 * C;
    const float* bottom = top + W2 * C;
    for (size_t j = 0; j < size_t(w); ++j)
      for (size_t k = 0; k < C; ++k)
        d[j * C + k] += (top[2 * j * C + k] + top[(2 * j + 1) * C + k]) +
                        (bottom[2 * j * C + k] + bottom[(2 * j + 1) * C + k]);
  }
}

}  // namespace mlpd
