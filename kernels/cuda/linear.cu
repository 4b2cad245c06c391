// Fully connected layer on the GPU: the products are cuBLAS GEMMs (kernels/cuda/gemm.cu), as on
// the CPU. The bias gradient is a column sum of dy over the batch; NCF calls it with one output
// column and a batch of up to a million rows, so it must spread over the whole GPU and still give
// the same bits every run: it is a cuBLAS GEMV of dy^T with a vector of ones (cuBLAS is
// deterministic with its default atomics mode), the ones kept in a device buffer of this file.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__global__ void broadcast_rows_kernel(const float* __restrict__ b, int n, int out, float* __restrict__ y) {
  const size_t total = size_t(n) * out;
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) y[i] = b[i % out];
}

__global__ void fill_kernel(float* p, size_t n, float v) {
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) p[i] = v;
}

// At least n ones on the device. Grown on the first calls, then reused: no allocation in the steady
// state. Growing waits for the queued GEMVs, so it grows to twice the old size and 64K ones at
// least: batches whose row count varies step by step (maskrcnn's RoIs) grow it once, not every
// few steps. One GPU per process; a process that switches GPUs gets a new buffer and leaves the old
// one behind.
const float* device_ones(size_t n) {
  static float* ones = nullptr;
  static size_t count = 0;
  static int on_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (ones && device == on_device && count >= n) return ones;
  if (ones && device == on_device) {
    CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued GEMVs may still read the old buffer
    CUDA_CHECK(cudaFree(ones));
  }
  const size_t grown = std::max({n, device == on_device ? 2 * count : 0, size_t(1) << 16});
  ones = nullptr;
  count = 0;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ones), sizeof(float) * grown));
  on_device = device;
  count = grown;
  n = grown;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ones, n, 1.0f);
  CUDA_CHECK_LAUNCH();
  return ones;
}

}  // namespace

void linear_forward(const float* x, int n, int in, int out, const float* w, const float* b, float* y) {
  if (n <= 0 || out <= 0) return;
  if (b) {
    broadcast_rows_kernel<<<blocks_for(size_t(n) * out), kThreads, 0, stream()>>>(b, n, out, y);
    CUDA_CHECK_LAUNCH();
  }
  gemm(false, false, n, out, in, 1.0f, x, in, w, out, b ? 1.0f : 0.0f, y, out);
}

void linear_backward(const float* x, const float* dy, int n, int in, int out, const float* w, float* dx, float* dw,
                     float* db) {
  if (dx) gemm(false, true, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  gemm(true, false, in, out, n, 1.0f, x, in, dy, out, 1.0f, dw, out);
  if (db) bias_grad(dy, n, out, db);
}

void bias_grad(const float* dy, int n, int out, float* db) {
  if (n <= 0 || out <= 0) return;
  // Column-major, dy is an [out x n] matrix with leading dimension out: db += dy * ones(n).
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSgemv(blas(), CUBLAS_OP_N, out, n, &one, dy, out, device_ones(size_t(n)), 1, &one, db, 1));
}

}  // namespace mlpd::cuda
