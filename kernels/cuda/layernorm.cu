// Layer norm over rows of d contiguous features on the GPU, with the CPU's arithmetic
// (kernels/cpu/layernorm.cpp): two-pass row statistics (mean, then mean of squared deviations),
// the backward's dx from two row sums. One warp per row: each lane sums its strided columns in
// float, and the warp folds the lanes in double with a fixed shuffle tree.
// dgamma and dbeta are column sums over all rows, computed without atomics so that every run gives
// the same bits: one block per tile of 32 columns, its row lanes walking the rows in a fixed
// order (summing in double), folded by a fixed tree in shared memory.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;              // rows per block of the row kernels (256 threads)
constexpr int kColTile = 32, kRowLanes = 16;   // the column-sum kernel's block: 32 x 16 threads

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // every lane holds the total
}

unsigned row_blocks(int64_t rows) {
  const int64_t b = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return unsigned(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    layernorm_forward_kernel(const float* __restrict__ x, int64_t rows, int d, const float* __restrict__ gamma,
                             const float* __restrict__ beta, float eps, float* __restrict__ y,
                             float* __restrict__ save_mean, float* __restrict__ save_invstd) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    const float* xr = x + r * d;
    float s = 0.0f;
    for (int j = lane; j < d; j += 32) s += xr[j];
    const float mean = float(warp_sum(double(s)) / double(d));
    float q = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float c = xr[j] - mean;
      q += c * c;
    }
    const double var = warp_sum(double(q)) / double(d);
    const float invstd = float(1.0 / sqrt(var + double(eps)));
    if (lane == 0) {
      save_mean[r] = mean;
      save_invstd[r] = invstd;
    }
    float* yr = y + r * d;
    for (int j = lane; j < d; j += 32) yr[j] = gamma[j] * ((xr[j] - mean) * invstd) + beta[j];
  }
}

// dx = invstd * (g - mean(g) - xhat * mean(g*xhat)), g = dy*gamma, xhat = (x - mean)*invstd.
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    layernorm_dx_kernel(const float* __restrict__ x, const float* dy, int64_t rows, int d,
                        const float* __restrict__ gamma, const float* __restrict__ save_mean,
                        const float* __restrict__ save_invstd, float* dx, bool accumulate) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    const float* xr = x + r * d;
    const float* dr = dy + r * d;
    const float mean = save_mean[r], invstd = save_invstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float g = dr[j] * gamma[j];
      sg += g;
      sgx += g * ((xr[j] - mean) * invstd);
    }
    const float inv_d = 1.0f / float(d);
    const float mg = float(warp_sum(double(sg))) * inv_d;
    const float mgx = float(warp_sum(double(sgx))) * inv_d;
    float* o = dx + r * d;  // may alias dy: each dx[j] is written after its dy[j] is read
    for (int j = lane; j < d; j += 32) {
      const float v = invstd * (dr[j] * gamma[j] - mg - ((xr[j] - mean) * invstd) * mgx);
      o[j] = accumulate ? o[j] + v : v;
    }
  }
}

// Block of columns [blockIdx.x * 32, +32): dgamma[j] += sum_r dy*xhat, dbeta[j] += sum_r dy.
// Must run before dx is written where dx aliases dy.
__global__ void __launch_bounds__(kColTile * kRowLanes)
    layernorm_param_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy, int64_t rows, int d,
                                const float* __restrict__ save_mean, const float* __restrict__ save_invstd,
                                float* __restrict__ dgamma, float* __restrict__ dbeta) {
  __shared__ double shg[kRowLanes][kColTile], shb[kRowLanes][kColTile];
  const int tx = int(threadIdx.x) % kColTile, ty = int(threadIdx.x) / kColTile;
  const int j = int(blockIdx.x) * kColTile + tx;
  double sg = 0.0, sb = 0.0;
  if (j < d) {
    for (int64_t r = ty; r < rows; r += kRowLanes) {
      const float g = dy[r * d + j];
      sg += double(g * ((x[r * d + j] - save_mean[r]) * save_invstd[r]));
      sb += double(g);
    }
  }
  shg[ty][tx] = sg;
  shb[ty][tx] = sb;
  __syncthreads();
  for (int half = kRowLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      shg[ty][tx] += shg[ty + half][tx];
      shb[ty][tx] += shb[ty + half][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && j < d) {
    dgamma[j] += float(shg[0][tx]);
    dbeta[j] += float(shb[0][tx]);
  }
}

}  // namespace

void layernorm_forward(const float* x, int64_t rows, int d, const float* gamma, const float* beta, float eps,
                       float* y, float* save_mean, float* save_invstd) {
  if (rows <= 0 || d <= 0) return;
  layernorm_forward_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream()>>>(x, rows, d, gamma, beta, eps, y,
                                                                                   save_mean, save_invstd);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(const float* x, const float* dy, int64_t rows, int d, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                        bool accumulate) {
  if (rows <= 0 || d <= 0) return;
  // The parameter gradients first: they read dy, which dx may overwrite.
  layernorm_param_grad_kernel<<<unsigned((d + kColTile - 1) / kColTile), kColTile * kRowLanes, 0, stream()>>>(
      x, dy, rows, d, save_mean, save_invstd, dgamma, dbeta);
  CUDA_CHECK_LAUNCH();
  layernorm_dx_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream()>>>(x, dy, rows, d, gamma, save_mean,
                                                                              save_invstd, dx, accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
