#include "kernels/ops.h"

#include <cmath>

namespace mlpd {

void sgd_momentum_update(float* p, const float* g, float* m, size_t n, float lr, float momentum,
                         float weight_decay) {
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] + weight_decay * p[i];
    m[i] = momentum * m[i] + gi;
    p[i] -= lr * m[i];
  }
}

namespace {

double squares(const float* x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace

void sum_squares(const float* x, size_t n, double* sum) { *sum += squares(x, n); }

void clip_by_global_norm(float* x, size_t n, const double* sum_of_squares, float max_norm) {
  const double norm = std::sqrt(*sum_of_squares);
  if (norm > static_cast<double>(max_norm)) scale_inplace(x, n, static_cast<float>(static_cast<double>(max_norm) / norm));
}

void lars_update(float* p, const float* g, float* m, size_t n, float lr, float momentum, float weight_decay,
                 float eta, float epsilon, bool skip_trust_and_decay, float* applied) {
  float trust = 1.0f;
  float wd = skip_trust_and_decay ? 0.0f : weight_decay;
  if (!skip_trust_and_decay) {
    double pn = std::sqrt(squares(p, n));
    double gn = std::sqrt(squares(g, n));
    double denom = gn + weight_decay * pn + epsilon;
    if (pn > 0.0 && denom > 0.0) trust = static_cast<float>(eta * pn / denom);
  }
  float scaled = lr * trust;
  for (size_t i = 0; i < n; ++i) {
    m[i] = momentum * m[i] + scaled * (g[i] + wd * p[i]);
    p[i] -= m[i];
  }
  if (applied) *applied = trust;
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
