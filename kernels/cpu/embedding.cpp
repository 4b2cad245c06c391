#include "kernels/ops.h"

namespace mlpd {

void embedding_gather(const float* table, int dim, const int32_t* idx, int n, float* out, int ld_out) {
  for (int i = 0; i < n; ++i) {
    const float* __restrict src = table + static_cast<size_t>(idx[i]) * static_cast<size_t>(dim);
    float* __restrict dst = out + static_cast<size_t>(i) * static_cast<size_t>(ld_out);
    for (int j = 0; j < dim; ++j) dst[j] = src[j];
  }
}

void embedding_scatter_add(float* dtable, int dim, const int32_t* idx, int n, const float* src, int ld_src) {
  for (int i = 0; i < n; ++i) {
    float* __restrict dst = dtable + static_cast<size_t>(idx[i]) * static_cast<size_t>(dim);
    const float* __restrict s = src + static_cast<size_t>(i) * static_cast<size_t>(ld_src);
    for (int j = 0; j < dim; ++j) dst[j] += s[j];
  }
}

}  // namespace mlpd
