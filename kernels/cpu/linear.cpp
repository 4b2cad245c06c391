#include "kernels/ops.h"

namespace mlpd {

void linear_forward(const float* x, int n, int in, int out, const float* w, const float* b,
                    float* y) {
  if (b) {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < out; ++j) y[size_t(i) * out + j] = b[j];
  }
  gemm(false, false, n, out, in, 1.0f, x, in, w, out, b ? 1.0f : 0.0f, y, out);
}

void linear_backward(const float* x, const float* dy, int n, int in, int out, const float* w,
                     float* dx, float* dw, float* db) {
  if (dx) gemm(false, true, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  gemm(true, false, in, out, n, 1.0f, x, in, dy, out, 1.0f, dw, out);
  if (db) bias_grad(dy, n, out, db);
}

void bias_grad(const float* dy, int n, int out, float* db) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) db[j] += dy[size_t(i) * out + j];
}

}  // namespace mlpd
