// ReLU and the residual add on the GPU: grid-stride loops, one element per thread per step. They
// are bound by memory bandwidth, so nothing cleverer pays. The comparisons are written as the
// CPU's std::max(0, v) is (0 < v ? v : 0): NaN and -0 give +0 on both devices.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__device__ __forceinline__ float relu(float v) { return 0.0f < v ? v : 0.0f; }

// Pointers may alias (y == x, dx == dy): each element is read before it is written, by the same
// thread, so no __restrict__.
__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = relu(x[i]);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

template <bool Relu>
__global__ void add_kernel(const float* a, const float* b, float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float s = a[i] + b[i];
    y[i] = Relu ? relu(s) : s;
  }
}

__global__ void scale_kernel(float* x, size_t n, float alpha) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= alpha;
}

}  // namespace

void scale_inplace(float* x, size_t n, float alpha) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, n, alpha);
  CUDA_CHECK_LAUNCH();
}

void relu_forward(const float* x, float* y, size_t n) {
  if (n == 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  CUDA_CHECK_LAUNCH();
}

void relu_backward(const float* y, const float* dy, float* dx, size_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, dy, dx, n);
  CUDA_CHECK_LAUNCH();
}

void add_forward(const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return;
  add_kernel<false><<<blocks_for(n), kThreads, 0, stream()>>>(a, b, y, n);
  CUDA_CHECK_LAUNCH();
}

void add_relu_forward(const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return;
  add_kernel<true><<<blocks_for(n), kThreads, 0, stream()>>>(a, b, y, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
