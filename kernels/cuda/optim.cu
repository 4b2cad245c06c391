// The optimizer updates on the GPU: one grid-stride pass over a contiguous range of the flat
// parameter, gradient and state buffers, with the CPU's arithmetic (kernels/cpu/optim.cpp).
// Sums of squares (LARS norms, gradient clipping) must give the same bits on every call, so they
// are reduced in a fixed tree: per-thread double sums over a grid whose size depends on n only,
// a shared-memory tree per block, then one block folds the block partials in index order.
#include <cmath>
#include <cstddef>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.cuh"

namespace mlpd::cuda {

namespace {

// partials[blockIdx.x] = this block's share of sum(a^2); with b, partials[gridDim.x + blockIdx.x]
// = its share of sum(b^2). Each float product is exact in double, as on the CPU.
__global__ void sum_squares_partials(const float* __restrict__ a, const float* __restrict__ b, size_t n,
                                     double* __restrict__ partials) {
  double sa = 0.0, sb = 0.0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double x = a[i];
    sa += x * x;
    if (b) {
      const double y = b[i];
      sb += y * y;
    }
  }
  sa = block_sum(sa);
  if (b) sb = block_sum(sb);  // b is the same for the whole block: every thread reaches the barrier
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sa;
    if (b) partials[gridDim.x + blockIdx.x] = sb;
  }
}

// One block per sum: out[blockIdx.x] = sum of partials[blockIdx.x * count + (0..count)].
__global__ void fold_partials(const double* __restrict__ partials, unsigned count, double* __restrict__ out) {
  const double* p = partials + size_t(blockIdx.x) * count;
  double s = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) s += p[i];
  s = block_sum(s);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void sgd_momentum_kernel(float* p, const float* g, float* m, size_t n, float lr, float momentum,
                                    float weight_decay) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float gi = g[i] + weight_decay * p[i];
    const float mi = momentum * m[i] + gi;
    m[i] = mi;
    p[i] -= lr * mi;
  }
}

// The trust ratio from sums = {||p||^2, ||g||^2} with the CPU's expression in double (each
// operation rounded on its own, as the host does: no fused multiply-add), or 1 without sums.
__global__ void lars_trust_kernel(const double* sums, float weight_decay, float eta, float epsilon, float* trust) {
  float t = 1.0f;
  if (sums) {
    const double pn = sqrt(sums[0]), gn = sqrt(sums[1]);
    const double denom = __dadd_rn(__dadd_rn(gn, __dmul_rn(double(weight_decay), pn)), double(epsilon));
    if (pn > 0.0 && denom > 0.0) t = static_cast<float>(__ddiv_rn(__dmul_rn(double(eta), pn), denom));
  }
  *trust = t;
}

__global__ void add_kernel(const double* from, double* into) { *into += *from; }

// x *= max_norm / norm where norm = sqrt(*sum_of_squares) > max_norm (each thread works the ratio
// out alike, rounded as the host's: double sqrt and division, then to float).
__global__ void clip_kernel(float* x, size_t n, const double* __restrict__ sum_of_squares, float max_norm) {
  const double norm = sqrt(*sum_of_squares);
  if (!(norm > double(max_norm))) return;
  const float alpha = static_cast<float>(__ddiv_rn(double(max_norm), norm));
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= alpha;
}

// scaled = lr * trust, the trust read where lars_trust_kernel wrote it; wd is 0 for views that
// skip trust and decay.
__global__ void lars_kernel(float* p, const float* g, float* m, size_t n, float momentum, float lr,
                            const float* __restrict__ trust, float wd) {
  const float scaled = lr * *trust;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float mi = momentum * m[i] + scaled * (g[i] + wd * p[i]);
    m[i] = mi;
    p[i] -= mi;
  }
}

// Adam; Lazy leaves p, m and v alone where the gradient is exactly zero (LazyAdam).
template <bool Lazy>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, size_t n, float b1, float b2, float eps,
                            float step, float inv_sqrt_b2) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float gi = g[i];
    if (Lazy && gi == 0.0f) continue;
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step * mi / (sqrtf(vi) * inv_sqrt_b2 + eps);
  }
}

// Blocks of the first reduction pass: a function of n alone, so the tree is the same every call.
unsigned reduce_blocks(size_t n) {
  const size_t per_block = size_t(kReduceThreads) * 4;
  const size_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxReduceBlocks ? kMaxReduceBlocks : b));
}

// Device scratch of the reductions: 2 * kMaxReduceBlocks partials, 2 results, and one slot for
// LARS's trust ratio. Allocated once for the process's GPU (one GPU per process); a process that
// switches GPUs gets a new one and leaves the old one (16 KiB) behind.
double* reduce_scratch() {
  static double* buf = nullptr;
  static int buf_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (!buf || device != buf_device) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), sizeof(double) * (2 * kMaxReduceBlocks + 3)));
    buf_device = device;
  }
  return buf;
}

// Queues sum(a^2), and sum(b^2) where b is given, into the device scratch; returns where they land.
const double* queue_sum_squares(const float* a, const float* b, size_t n) {
  double* scratch = reduce_scratch();
  double* out = scratch + 2 * kMaxReduceBlocks;
  const unsigned blocks = reduce_blocks(n);
  const unsigned count = b ? 2 : 1;
  sum_squares_partials<<<blocks, kReduceThreads, 0, stream()>>>(a, b, n, scratch);
  CUDA_CHECK_LAUNCH();
  fold_partials<<<count, kReduceThreads, 0, stream()>>>(scratch, blocks, out);
  CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace

void sgd_momentum_update(float* p, const float* g, float* m, size_t n, float lr, float momentum,
                         float weight_decay) {
  if (n == 0) return;
  sgd_momentum_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, m, n, lr, momentum, weight_decay);
  CUDA_CHECK_LAUNCH();
}

void sum_squares(const float* x, size_t n, double* sum) {
  if (n == 0) return;
  add_kernel<<<1, 1, 0, stream()>>>(queue_sum_squares(x, nullptr, n), sum);
  CUDA_CHECK_LAUNCH();
}

void clip_by_global_norm(float* x, size_t n, const double* sum_of_squares, float max_norm) {
  if (n == 0) return;
  clip_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, n, sum_of_squares, max_norm);
  CUDA_CHECK_LAUNCH();
}

void lars_update(float* p, const float* g, float* m, size_t n, float lr, float momentum, float weight_decay,
                 float eta, float epsilon, bool skip_trust_and_decay, float* trust) {
  // Both norms in one pass, the trust ratio and the update all queued: no host wait per view.
  float* applied = trust ? trust : reinterpret_cast<float*>(reduce_scratch() + 2 * kMaxReduceBlocks + 2);
  const double* sums = n > 0 && !skip_trust_and_decay ? queue_sum_squares(p, g, n) : nullptr;
  lars_trust_kernel<<<1, 1, 0, stream()>>>(sums, weight_decay, eta, epsilon, applied);
  CUDA_CHECK_LAUNCH();
  if (n == 0) return;
  const float wd = skip_trust_and_decay ? 0.0f : weight_decay;
  lars_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, m, n, momentum, lr, applied, wd);
  CUDA_CHECK_LAUNCH();
}

void adam_update(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2, float eps,
                 float bias1, float bias2) {
  if (n == 0) return;
  const float step = lr / bias1, inv_sqrt_b2 = 1.0f / std::sqrt(bias2);
  adam_kernel<false><<<blocks_for(n), kThreads, 0, stream()>>>(p, g, m, v, n, b1, b2, eps, step, inv_sqrt_b2);
  CUDA_CHECK_LAUNCH();
}

void lazy_adam_update(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2,
                      float eps, float bias1, float bias2) {
  if (n == 0) return;
  const float step = lr / bias1, inv_sqrt_b2 = 1.0f / std::sqrt(bias2);
  adam_kernel<true><<<blocks_for(n), kThreads, 0, stream()>>>(p, g, m, v, n, b1, b2, eps, step, inv_sqrt_b2);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
