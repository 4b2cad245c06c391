// MiniGo's losses on the GPU with the CPU's arithmetic (kernels/cpu/minigo_ops.cpp: exp, tanh and
// the sums in double). One warp per row for the policy loss, one thread per position for the value
// loss; per-row losses go to Arena scratch and one block folds them in a fixed tree, so the totals
// are the same bits every run. The total is added to the caller's loss sum on the device.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.cuh"

namespace mlpd::cuda {

namespace {

constexpr int kRowsThreads = 256;  // 8 rows (warps) per block

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

__device__ __forceinline__ double warp_max(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmax(v, __shfl_down_sync(0xffffffffu, v, offset));
  return __shfl_sync(0xffffffffu, v, 0);
}

__global__ void __launch_bounds__(kRowsThreads)
    softmax_xent_soft_kernel(const float* __restrict__ logits, const float* __restrict__ targets, int n, int classes,
                             float grad_scale, float* __restrict__ dlogits, double* __restrict__ row_loss) {
  const int row = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (row >= n) return;  // the whole warp leaves together
  const int lane = int(threadIdx.x) % 32;
  const float* z = logits + size_t(row) * classes;
  const float* t = targets + size_t(row) * classes;
  double zmax = -INFINITY;
  for (int j = lane; j < classes; j += 32) zmax = fmax(zmax, double(z[j]));
  zmax = warp_max(zmax);
  double sum = 0.0;
  for (int j = lane; j < classes; j += 32) sum += exp(double(z[j]) - zmax);
  const double lse = log(warp_sum(sum)) + zmax;
  double loss = 0.0;
  for (int j = lane; j < classes; j += 32) loss -= double(t[j]) * (double(z[j]) - lse);
  loss = warp_sum(loss);
  if (lane == 0) row_loss[row] = loss;
  if (dlogits) {
    float* g = dlogits + size_t(row) * classes;
    for (int j = lane; j < classes; j += 32) g[j] = float((exp(double(z[j]) - lse) - double(t[j])) * grad_scale);
  }
}

__global__ void tanh_mse_kernel(const float* __restrict__ x, const float* __restrict__ z, int n, float grad_scale,
                                float* __restrict__ dx, double* __restrict__ row_loss) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const double v = tanh(double(x[i]));
  const double d = v - double(z[i]);
  row_loss[i] = d * d;
  if (dx) dx[i] = float(2.0 * d * (1.0 - v * v) * grad_scale);
}

// One block of kReduceThreads: *out += the sum of the n row losses, in a fixed tree.
__global__ void fold_rows(const double* __restrict__ rows, int n, double* __restrict__ out) {
  double s = 0.0;
  for (int i = int(threadIdx.x); i < n; i += int(kReduceThreads)) s += rows[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out += s;
}

// Row losses as doubles in the arena: n + 1 doubles (2 floats each), aligned. Each loss gives them
// back as it returns (an ArenaScope: what the next op queues on the stream runs after the fold), so
// the two losses of a step take minigo_loss_scratch_floats once, not twice.
double* row_scratch(Arena& arena, int n) {
  return reinterpret_cast<double*>(arena_floats(arena, 2 * size_t(n + 1) + 2));
}

void fold_into(const double* rows, int n, double* loss_sum) {
  if (!loss_sum) return;
  fold_rows<<<1, kReduceThreads, 0, stream()>>>(rows, n, loss_sum);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t minigo_loss_scratch_floats(int n) { return 2 * size_t(n + 1) + 2 + 16; }

void softmax_xent_soft(const float* logits, const float* targets, int n, int classes, float grad_scale,
                       float* dlogits, double* loss_sum, Arena& arena) {
  if (n <= 0 || classes <= 0) return;
  ArenaScope scope(arena);
  double* rows = row_scratch(arena, n);
  const unsigned blocks = unsigned((size_t(n) * 32 + kRowsThreads - 1) / kRowsThreads);
  softmax_xent_soft_kernel<<<blocks, kRowsThreads, 0, stream()>>>(logits, targets, n, classes, grad_scale, dlogits,
                                                                  rows);
  CUDA_CHECK_LAUNCH();
  fold_into(rows, n, loss_sum);
}

void tanh_mse(const float* x, const float* z, int n, float grad_scale, float* dx, double* loss_sum, Arena& arena) {
  if (n <= 0) return;
  ArenaScope scope(arena);
  double* rows = row_scratch(arena, n);
  tanh_mse_kernel<<<unsigned((n + 255) / 256), 256, 0, stream()>>>(x, z, n, grad_scale, dx, rows);
  CUDA_CHECK_LAUNCH();
  fold_into(rows, n, loss_sum);
}

}  // namespace mlpd::cuda
