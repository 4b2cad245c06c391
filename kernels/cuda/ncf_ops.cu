// The NeuMF ops on the GPU (kernels/cpu/ncf_ops.cpp): the GMF product and its backward are one
// thread per element; sigmoid + BCE is fused, one thread per logit, with the summed loss reduced
// in a fixed tree (per-thread double sums over a grid sized by n alone, a shared-memory tree per
// block, one block folding the block sums in index order) so that it has the same bits every call.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.cuh"

namespace mlpd::cuda {

namespace {


__global__ void gmf_forward_kernel(const float* a, int lda, const float* b, int ldb, int n, int dim, float* y,
                                   int ldy) {
  const size_t total = size_t(n) * size_t(dim);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t i = e / size_t(dim), j = e % size_t(dim);
    y[i * size_t(ldy) + j] = a[i * size_t(lda) + j] * b[i * size_t(ldb) + j];
  }
}

__global__ void gmf_backward_kernel(const float* a, int lda, const float* b, int ldb, const float* dy, int ldy,
                                    int n, int dim, float* da, float* db) {
  const size_t total = size_t(n) * size_t(dim);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t i = e / size_t(dim), j = e % size_t(dim);
    const float g = dy[i * size_t(ldy) + j];
    const float ai = a[i * size_t(lda) + j], bi = b[i * size_t(ldb) + j];
    da[e] = g * bi;  // da, db are contiguous [n, dim]: row i, column j is element e
    db[e] = g * ai;
  }
}

// Per logit: the loss (summed into partials[blockIdx.x]) and, where dlogits is given, its gradient.
__global__ void sigmoid_bce_kernel(const float* __restrict__ logits, const float* __restrict__ labels, int n,
                                   float grad_scale, float* __restrict__ dlogits, double* __restrict__ partials) {
  double sum = 0.0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(n); i += stride) {
    const float z = logits[i], y = labels[i];
    const float e = expf(-fabsf(z));  // in (0, 1]: never overflows
    sum += double(fmaxf(z, 0.0f) - y * z + log1pf(e));
    if (dlogits) {
      const float s = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      dlogits[i] = (s - y) * grad_scale;
    }
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block: *out += sum of partials[0..count), in a fixed order (out: the caller's loss sum).
__global__ void fold_sums(const double* __restrict__ partials, unsigned count, double* __restrict__ out) {
  double s = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out += s;
}

// Device scratch of the loss sum: kMaxReduceBlocks partials. Allocated once for the
// process's GPU (a process that switches GPUs gets a new one and leaves the old 8 KiB behind).
double* sum_scratch() {
  static double* buf = nullptr;
  static int buf_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (!buf || device != buf_device) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), sizeof(double) * kMaxReduceBlocks));
    buf_device = device;
  }
  return buf;
}

}  // namespace

void gmf_forward(const float* a, int lda, const float* b, int ldb, int n, int dim, float* y, int ldy) {
  if (n <= 0 || dim <= 0) return;
  const size_t total = size_t(n) * size_t(dim);
  gmf_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(a, lda, b, ldb, n, dim, y, ldy);
  CUDA_CHECK_LAUNCH();
}

void gmf_backward(const float* a, int lda, const float* b, int ldb, const float* dy, int ldy, int n, int dim,
                  float* da, float* db) {
  if (n <= 0 || dim <= 0) return;
  const size_t total = size_t(n) * size_t(dim);
  gmf_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(a, lda, b, ldb, dy, ldy, n, dim, da, db);
  CUDA_CHECK_LAUNCH();
}

void sigmoid_bce(const float* logits, const float* labels, int n, float grad_scale, float* dlogits, double* loss_sum) {
  if (n <= 0) return;
  double* partials = sum_scratch();
  // Blocks: a function of n alone, so the summation tree is the same on every call.
  const size_t per_block = size_t(kReduceThreads) * 4;
  const size_t want = (size_t(n) + per_block - 1) / per_block;
  const unsigned blocks = static_cast<unsigned>(want > kMaxReduceBlocks ? kMaxReduceBlocks : want);
  sigmoid_bce_kernel<<<blocks, kReduceThreads, 0, stream()>>>(logits, labels, n, grad_scale, dlogits, partials);
  CUDA_CHECK_LAUNCH();
  if (!loss_sum) return;
  fold_sums<<<1, kReduceThreads, 0, stream()>>>(partials, blocks, loss_sum);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
