// Dropout on the CPU. The mask is core/rng.h's counter-based uniform of (seed, offset + i), so
// the CUDA op (kernels/cuda/dropout.cu) draws the same one. rng_u64(seed, stream, c) is
// mix64(mix64(seed ^ mix64(stream)) ^ c): the key mix64(seed ^ mix64(stream)) is the same for every
// element, so it is computed once and the loop does one mix64 per element (same bits).
#include <cstring>

#include "core/rng.h"
#include "kernels/ops.h"

namespace mlpd {

void dropout_forward(const float* x, size_t n, float p, uint64_t seed, uint64_t offset, float* y, uint8_t* mask) {
  if (p == 0.0f) {  // an exact copy, every element kept
    if (y != x) std::memmove(y, x, sizeof(float) * n);
    if (mask) std::memset(mask, 1, n);
    return;
  }
  const float scale = 1.0f / (1.0f - p);  // never applied to a dropped element, so p == 1 is fine
  const uint64_t key = mix64(seed ^ mix64(kDropoutStream));
  for (size_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(mix64(key ^ (offset + i)) >> 40) * (1.0f / 16777216.0f);
    const bool keep = u >= p;
    if (mask) mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.0f;
  }
}

void dropout_backward(const float* dy, const uint8_t* mask, size_t n, float p, float* dx) {
  if (p == 0.0f) {
    if (dx != dy) std::memmove(dx, dy, sizeof(float) * n);
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

}  // namespace mlpd
