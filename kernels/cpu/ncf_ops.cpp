#include "kernels/ncf_ops.h"

#include <cmath>

namespace mlpd {

void gmf_forward(const float* a, int lda, const float* b, int ldb, int n, int dim, float* y, int ldy) {
  for (int i = 0; i < n; ++i) {
    const float* __restrict ar = a + static_cast<size_t>(i) * lda;
    const float* __restrict br = b + static_cast<size_t>(i) * ldb;
    float* __restrict yr = y + static_cast<size_t>(i) * ldy;
    for (int j = 0; j < dim; ++j) yr[j] = ar[j] * br[j];
  }
}

void gmf_backward(const float* a, int lda, const float* b, int ldb, const float* dy, int ldy, int n, int dim,
                  float* da, float* db) {
  for (int i = 0; i < n; ++i) {
    const float* __restrict ar = a + static_cast<size_t>(i) * lda;
    const float* __restrict br = b + static_cast<size_t>(i) * ldb;
    const float* __restrict dyr = dy + static_cast<size_t>(i) * ldy;
    float* __restrict dar = da + static_cast<size_t>(i) * dim;
    float* __restrict dbr = db + static_cast<size_t>(i) * dim;
    for (int j = 0; j < dim; ++j) {
      dar[j] = dyr[j] * br[j];
      dbr[j] = dyr[j] * ar[j];
    }
  }
}

double sigmoid_bce(const float* logits, const float* labels, int n, float grad_scale, float* dlogits) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const float z = logits[i], y = labels[i];
    const float e = std::exp(-std::fabs(z));  // in (0, 1]: never overflows
    sum += static_cast<double>(std::fmax(z, 0.0f) - y * z + std::log1p(e));
    if (dlogits) {
      const float s = z >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
      dlogits[i] = (s - y) * grad_scale;
    }
  }
  return sum;
}

void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                 float lr, float b1, float b2, float eps, float bias1, float bias2) {
  const float step = lr / bias1, inv_sqrt_b2 = 1.0f / std::sqrt(bias2);
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step * mi / (std::sqrt(vi) * inv_sqrt_b2 + eps);
  }
}

void lazy_adam_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                      size_t n, float lr, float b1, float b2, float eps, float bias1, float bias2) {
  const float step = lr / bias1, inv_sqrt_b2 = 1.0f / std::sqrt(bias2);
  constexpr size_t kBlock = 16;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = b + kBlock < n ? b + kBlock : n;
    bool any = false;
    for (size_t i = b; i < e; ++i) any |= g[i] != 0.0f;
    if (!any) continue;
    for (size_t i = b; i < e; ++i) {
      const float gi = g[i];
      if (gi == 0.0f) continue;
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] -= step * mi / (std::sqrt(vi) * inv_sqrt_b2 + eps);
    }
  }
}

}  // namespace mlpd
