#include "kernels/ops.h"

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

void sigmoid_bce(const float* logits, const float* labels, int n, float grad_scale, float* dlogits, double* loss_sum) {
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
  if (loss_sum) *loss_sum += sum;
}

}  // namespace mlpd
