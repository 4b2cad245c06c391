// Row block copy (kernels/op_signatures.inc: copy_rows): NeuMF concatenates its GMF and MLP
// outputs along columns and splits the gradient back; one thread per element, coalesced along a row.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {
__global__ void copy_rows_kernel(const float* src, int ld_src, int n, int width, float* dst, int ld_dst) {
  const size_t total = static_cast<size_t>(n) * static_cast<size_t>(width);
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = e / static_cast<size_t>(width), j = e % static_cast<size_t>(width);
    dst[i * static_cast<size_t>(ld_dst) + j] = src[i * static_cast<size_t>(ld_src) + j];
  }
}
}  // namespace

void copy_rows(const float* src, int ld_src, int n, int width, float* dst, int ld_dst) {
  const size_t total = static_cast<size_t>(n) * static_cast<size_t>(width);
  if (total == 0) return;
  copy_rows_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(src, ld_src, n, width, dst, ld_dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
