// MiniGo's losses on the CPU: soft-target softmax cross-entropy (policy) and tanh squared error
// (value), forward and backward fused. Sums in double, rows in order: the same bits every run.
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace mlpd {

size_t minigo_loss_scratch_floats(int /*n*/) { return 0; }

void softmax_xent_soft(const float* logits, const float* targets, int n, int classes, float grad_scale,
                       float* dlogits, double* loss_sum, Arena& /*arena*/) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + size_t(i) * classes;
    const float* t = targets + size_t(i) * classes;
    double zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = std::max(zmax, double(z[j]));
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(double(z[j]) - zmax);
    const double lse = std::log(sum) + zmax;
    double loss = 0.0;
    for (int j = 0; j < classes; ++j) loss -= double(t[j]) * (double(z[j]) - lse);
    total += loss;
    if (dlogits) {
      float* g = dlogits + size_t(i) * classes;
      for (int j = 0; j < classes; ++j) g[j] = float((std::exp(double(z[j]) - lse) - double(t[j])) * grad_scale);
    }
  }
  if (loss_sum) *loss_sum += total;
}

void tanh_mse(const float* x, const float* z, int n, float grad_scale, float* dx, double* loss_sum, Arena& /*arena*/) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const double v = std::tanh(double(x[i]));
    const double d = v - double(z[i]);
    total += d * d;
    if (dx) dx[i] = float(2.0 * d * (1.0 - v * v) * grad_scale);
  }
  if (loss_sum) *loss_sum += total;
}

}  // namespace mlpd
