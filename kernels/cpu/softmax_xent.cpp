#include <cmath>

#include "kernels/ops.h"

namespace mlpd {

void softmax_xent(const float* logits, const int32_t* labels, int n, int classes,
                  float label_smoothing, float grad_scale, float* dlogits, double* loss_sum, int* correct) {
  double total = 0.0;
  int right = 0;
  const double off = double(label_smoothing) / classes;
  const double on = 1.0 - double(label_smoothing) + off;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + size_t(i) * classes;
    int arg = 0;
    for (int j = 1; j < classes; ++j)
      if (z[j] > z[arg]) arg = j;
    const int label = labels[i];
    if (arg == label) ++right;
    const double zmax = z[arg];
    double sum = 0.0, sum_z = 0.0;
    for (int j = 0; j < classes; ++j) {
      sum += std::exp(double(z[j]) - zmax);
      sum_z += double(z[j]);
    }
    const double log_sum = std::log(sum) + zmax;  // log sum exp
    // loss = -sum_j t_j (z_j - lse) = lse - off*sum_z - (on - off)*z_label
    total += log_sum - off * sum_z - (on - off) * double(z[label]);
    if (dlogits) {  // may be logits: each z[j] is read before g[j] is written
      float* g = dlogits + size_t(i) * classes;
      for (int j = 0; j < classes; ++j) {
        const double p = std::exp(double(z[j]) - log_sum);
        g[j] = float((p - (j == label ? on : off)) * grad_scale);
      }
    }
  }
  if (correct) *correct = right;
  if (loss_sum) *loss_sum += total;
}

}  // namespace mlpd
