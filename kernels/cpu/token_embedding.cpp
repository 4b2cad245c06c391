// Token embedding with fairseq's sinusoidal positions on the CPU. The position encoding depends on
// (position, column) only, so it is computed once per position (in double, then rounded to float)
// and added to that position's rows of every batch row: len*dim sines and cosines, not batch*len*dim.
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace mlpd {

namespace {

// PE(pos) into pe[0, dim): sin(pos*w_i) for i < half, cos(pos*w_(i-half)) for half <= i < 2*half,
// 0 for a last odd column. w_0 = 1 also when half == 1 (where the formula divides by zero).
void position_encoding(int pos, int dim, float* pe) {
  const int half = dim / 2;
  const double step = half > 1 ? std::log(10000.0) / double(half - 1) : 0.0;
  for (int i = 0; i < half; ++i) {
    const double angle = double(pos) * std::exp(-double(i) * step);
    pe[i] = float(std::sin(angle));
    pe[half + i] = float(std::cos(angle));
  }
  if (dim % 2) pe[dim - 1] = 0.0f;
}

}  // namespace

void token_embedding_forward(const float* table, int dim, const int32_t* tokens, int batch, int len, float scale,
                             int pos_offset, bool add_positions, float* out) {
  if (dim <= 0) return;
  std::vector<float> pe(add_positions ? size_t(dim) : 0);
  for (int t = 0; t < len; ++t) {
    if (add_positions) position_encoding(pos_offset + t, dim, pe.data());
    for (int b = 0; b < batch; ++b) {
      const size_t r = size_t(b) * size_t(len) + size_t(t);
      const float* __restrict src = table + size_t(tokens[r]) * size_t(dim);
      float* __restrict dst = out + r * size_t(dim);
      if (add_positions) {
        const float* __restrict p = pe.data();
        for (int j = 0; j < dim; ++j) dst[j] = scale * src[j] + p[j];
      } else {
        for (int j = 0; j < dim; ++j) dst[j] = scale * src[j];
      }
    }
  }
}

void token_embedding_backward(float* dtable, int dim, const int32_t* tokens, int n, float scale, const float* dout) {
  for (int r = 0; r < n; ++r) {
    float* __restrict dst = dtable + size_t(tokens[r]) * size_t(dim);
    const float* __restrict g = dout + size_t(r) * size_t(dim);
    for (int j = 0; j < dim; ++j) dst[j] += scale * g[j];
  }
}

}  // namespace mlpd
