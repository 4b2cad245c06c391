// Nearest 2x upsampling (kernels/op_signatures.inc: upsample_nearest2x_*) on the GPU: a thread per
// output element (forward) or per input element (backward, which sums its 2x2 block in the CPU's
// order, so both devices give the same bits).
#include <cstddef>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__global__ void upsample_forward_kernel(const float* x, int n, int h, int w, int c, float* y) {
  const size_t C = size_t(c), W2 = size_t(2) * w, total = size_t(n) * 2 * h * W2 * C;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const size_t k = e % C, j = (e / C) % W2, i = (e / (C * W2)) % (size_t(2) * h), b = e / (C * W2 * 2 * h);
    y[e] = x[((b * h + i / 2) * w + j / 2) * C + k];
  }
}

__global__ void upsample_backward_kernel(const float* dy, int n, int h, int w, int c, float* dx) {
  const size_t C = size_t(c), W2 = size_t(2) * w, total = size_t(n) * h * w * C;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const size_t k = e % C, j = (e / C) % w, row = e / (C * w);  // row = b * h + i
    const float* top = dy + row * 2 * W2 * C;
    const float* bottom = top + W2 * C;
    const float s = __fadd_rn(__fadd_rn(top[2 * j * C + k], top[(2 * j + 1) * C + k]),
                              __fadd_rn(bottom[2 * j * C + k], bottom[(2 * j + 1) * C + k]));
    dx[e] = __fadd_rn(dx[e], s);
  }
}

}  // namespace

void upsample_nearest2x_forward(const float* x, int n, int h, int w, int c, float* y) {
  const size_t total = size_t(n) * 4 * h * w * c;
  if (total == 0) return;
  upsample_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x, n, h, w, c, y);
  CUDA_CHECK_LAUNCH();
}

void upsample_nearest2x_backward(const float* dy, int n, int h, int w, int c, float* dx) {
  const size_t total = size_t(n) * h * w * c;
  if (total == 0) return;
  upsample_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(dy, n, h, w, c, dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
