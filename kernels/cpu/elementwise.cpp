#include <algorithm>

#include "kernels/ops.h"

namespace mlpd {

void relu_forward(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = std::max(0.0f, x[i]);
}

void relu_backward(const float* y, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void add_forward(const float* a, const float* b, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_relu_forward(const float* a, const float* b, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = std::max(0.0f, a[i] + b[i]);
}

}  // namespace mlpd
