// Dropout on the GPU, one thread per element (grid-stride). The mask is the device copy of
// core/rng.h's uniform (kernels/cuda/rng.cuh), so it is the CPU's bit for bit; the per-call key
// mix64(seed ^ mix64(kDropoutStream)) is hoisted as on the CPU (same bits as rng_uniform), and
// the scale 1/(1-p) is computed on the host, so y matches the CPU's exactly too.
#include <cstddef>
#include <cstdint>

#include "core/rng.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/rng.cuh"

namespace mlpd::cuda {

namespace {

// y may alias x: each element is read before it is written, by the same thread.
__global__ void dropout_forward_kernel(const float* x, size_t n, float p, float scale, uint64_t key, uint64_t offset,
                                       float* y, uint8_t* __restrict__ mask) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = static_cast<float>(mix64(key ^ (offset + i)) >> 40) * (1.0f / 16777216.0f);
    const bool keep = u >= p;
    if (mask) mask[i] = keep ? 1 : 0;
    y[i] = keep ? __fmul_rn(x[i], scale) : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const float* dy, const uint8_t* __restrict__ mask, size_t n, float scale,
                                        float* dx) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = mask[i] ? __fmul_rn(dy[i], scale) : 0.0f;
}

}  // namespace

void dropout_forward(const float* x, size_t n, float p, uint64_t seed, uint64_t offset, float* y, uint8_t* mask) {
  if (n == 0) return;
  if (p == 0.0f) {  // an exact copy, every element kept
    if (y != x) CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream()));
    if (mask) CUDA_CHECK(cudaMemsetAsync(mask, 1, n, stream()));
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  const uint64_t key = mix64(seed ^ mix64(::mlpd::kDropoutStream));
  dropout_forward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, n, p, scale, key, offset, y, mask);
  CUDA_CHECK_LAUNCH();
}

void dropout_backward(const float* dy, const uint8_t* mask, size_t n, float p, float* dx) {
  if (n == 0) return;
  if (p == 0.0f) {
    if (dx != dy) CUDA_CHECK(cudaMemcpyAsync(dx, dy, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  dropout_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(dy, mask, n, 1.0f / (1.0f - p), dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
