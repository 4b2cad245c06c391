// Deterministic block reductions shared by the kernels that return a sum to the host (optimizer
// norms, losses): a fixed tree, so the same inputs give the same bits on every run.
#pragma once
#include <cuda_runtime.h>

namespace mlpd::cuda {

constexpr unsigned kReduceThreads = 256;   // the block size every caller of block_sum launches with
constexpr unsigned kMaxReduceBlocks = 1024;

// Sum of v over the block's kReduceThreads threads; every thread gets the total.
__device__ inline double block_sum(double v) {
  __shared__ double sh[kReduceThreads];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const double total = sh[0];
  __syncthreads();  // the next call may overwrite sh
  return total;
}

}  // namespace mlpd::cuda
