#include <algorithm>
#include <cstring>

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

void scale_inplace(float* x, size_t n, float alpha) {
  for (size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void copy_rows(const float* src, int ld_src, int n, int width, float* dst, int ld_dst) {
  for (int i = 0; i < n; ++i)
    std::memcpy(dst + static_cast<size_t>(i) * ld_dst, src + static_cast<size_t>(i) * ld_src, sizeof(float) * width);
}

}  // namespace mlpd
