// Batch norm over an NHWC tensor seen as [rows, c] on the GPU, with the CPU's arithmetic
// (kernels/cpu/batchnorm.cpp): E[x^2] - E[x]^2 statistics and the backward's two sums in double.
// A run must give the same bits every time, so the per-channel sums never use atomics: the rows
// are cut into a fixed number of chunks (a function of rows and c only), each block sums one chunk
// of one tile of channels with a fixed tree over its row lanes and writes a partial, and one warp
// per channel folds the partials in chunk order with a fixed shuffle tree.
// Scratch: the partials (2 * chunks * c doubles) live in a device buffer of this file, because
// the forward pass has no arena; it is grown on the first calls and then reused. The backward's
// two per-channel totals (2*c doubles, the "4*c floats" of the contract) come from the arena.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

constexpr int kBnThreads = 256;
constexpr int64_t kTargetBlocks = 1024;     // partial-sum blocks wanted to fill the GPU
constexpr int64_t kMinRowsPerChunk = 256;   // below this a chunk is not worth a block
constexpr int64_t kApplyBlocks = 2048;      // elementwise blocks wanted

// How a [rows, c] tensor is spread over blocks: tiles of tile_c channels (a power of two <= 32)
// across a block's threads, so a warp reads contiguous floats of one or more rows; the other
// dimension of the block is `lanes` row lanes; chunks of rows_per_chunk rows for the sums.
struct ChannelGrid {
  int tile_c = 1, lanes = kBnThreads, channel_tiles = 1, chunks = 1;
  int64_t rows_per_chunk = 1;
};

ChannelGrid channel_grid(int64_t rows, int c) {
  ChannelGrid g;
  while (g.tile_c < c && g.tile_c < 32) g.tile_c *= 2;
  g.lanes = kBnThreads / g.tile_c;
  g.channel_tiles = (c + g.tile_c - 1) / g.tile_c;
  int64_t chunks = (kTargetBlocks + g.channel_tiles - 1) / g.channel_tiles;
  chunks = std::min(chunks, std::max<int64_t>(1, rows / kMinRowsPerChunk));
  g.rows_per_chunk = (rows + chunks - 1) / chunks;
  g.chunks = int((rows + g.rows_per_chunk - 1) / g.rows_per_chunk);
  return g;
}

// Grid of the elementwise passes: channel tiles by row groups of `lanes` rows (grid-stride).
dim3 apply_grid(const ChannelGrid& g, int64_t rows) {
  const int64_t want = (kApplyBlocks + g.channel_tiles - 1) / g.channel_tiles;
  const int64_t row_groups = (rows + g.lanes - 1) / g.lanes;
  return dim3(unsigned(g.channel_tiles), unsigned(std::max<int64_t>(1, std::min({want, row_groups, int64_t(65535)}))));
}

// The partials of the reductions: grown when a call needs more, then reused (one GPU per
// process; a process that switches GPUs gets a new buffer and leaves the old one behind).
double* partials_buffer(size_t doubles) {
  static double* buf = nullptr;
  static size_t capacity = 0;
  static int on_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (buf && device == on_device && capacity >= doubles) return buf;
  if (buf && device == on_device) {
    CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued reductions may still use the old buffer
    CUDA_CHECK(cudaFree(buf));
  }
  buf = nullptr;
  capacity = 0;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), sizeof(double) * doubles));
  on_device = device;
  capacity = doubles;
  return buf;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // the total is in lane 0
}

// dy masked by the fused ReLU's output (y > 0), as the CPU does.
__device__ __forceinline__ float masked_grad(const float* dy, const float* relu_out, size_t o) {
  return relu_out && !(relu_out[o] > 0.0f) ? 0.0f : dy[o];
}

// Block (channel tile blockIdx.x, chunk blockIdx.y) writes, for each of its channels ch,
// partial1[chunk * c + ch] and partial2[chunk * c + ch]:
//   forward:  sum x and sum x^2;
//   backward: sum g and sum g * (x - mean), g = dy masked by relu_out.
template <bool Backward>
__global__ void __launch_bounds__(kBnThreads)
    channel_partial_sums_kernel(const float* __restrict__ x, const float* dy, const float* __restrict__ relu_out,
                                const float* __restrict__ mean, int64_t rows, int c, int tile_c,
                                int64_t rows_per_chunk, double* __restrict__ partial1, double* __restrict__ partial2) {
  __shared__ double sh1[kBnThreads], sh2[kBnThreads];
  const int tx = int(threadIdx.x) % tile_c, ty = int(threadIdx.x) / tile_c, lanes = kBnThreads / tile_c;
  const int ch = int(blockIdx.x) * tile_c + tx;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  double s1 = 0.0, s2 = 0.0;
  if (ch < c) {
    const double m = Backward ? double(mean[ch]) : 0.0;
    for (int64_t r = r0 + ty; r < r1; r += lanes) {
      const size_t o = size_t(r) * c + ch;
      if constexpr (Backward) {
        const double g = masked_grad(dy, relu_out, o);
        s1 += g;
        s2 += g * (double(x[o]) - m);
      } else {
        const double v = x[o];
        s1 += v;
        s2 += v * v;
      }
    }
  }
  sh1[threadIdx.x] = s1;
  sh2[threadIdx.x] = s2;
  __syncthreads();
  // Fold the row lanes in a fixed tree: thread (tx, ty) takes (tx, ty + half).
  for (int half = lanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      sh1[threadIdx.x] += sh1[threadIdx.x + half * tile_c];
      sh2[threadIdx.x] += sh2[threadIdx.x + half * tile_c];
    }
    __syncthreads();
  }
  if (ty == 0 && ch < c) {
    partial1[size_t(blockIdx.y) * c + ch] = sh1[tx];
    partial2[size_t(blockIdx.y) * c + ch] = sh2[tx];
  }
}

// One warp per channel: the channel's totals over the chunks, in a fixed order.
__device__ __forceinline__ bool fold_channel(const double* partial1, const double* partial2, int chunks, int c,
                                             int& ch, double& t1, double& t2) {
  ch = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (ch >= c) return false;  // the whole warp leaves together
  const int lane = int(threadIdx.x) % 32;
  double s1 = 0.0, s2 = 0.0;
  for (int k = lane; k < chunks; k += 32) {
    s1 += partial1[size_t(k) * c + ch];
    s2 += partial2[size_t(k) * c + ch];
  }
  t1 = warp_sum(s1);
  t2 = warp_sum(s2);
  return lane == 0;
}

__global__ void forward_stats_kernel(const double* __restrict__ partial1, const double* __restrict__ partial2,
                                     int chunks, int c, int64_t rows, float momentum, float eps,
                                     float* __restrict__ running_mean, float* __restrict__ running_var,
                                     float* __restrict__ save_mean, float* __restrict__ save_invstd) {
  int ch;
  double sum, sq;
  if (!fold_channel(partial1, partial2, chunks, c, ch, sum, sq)) return;
  const double mean = sum / double(rows);
  const double var = fmax(0.0, sq / double(rows) - mean * mean);  // biased: normalises
  const double unbiased = rows > 1 ? var * double(rows) / double(rows - 1) : var;  // running update
  save_mean[ch] = float(mean);
  save_invstd[ch] = float(1.0 / sqrt(var + double(eps)));
  running_mean[ch] = momentum * running_mean[ch] + (1.0f - momentum) * float(mean);
  running_var[ch] = momentum * running_var[ch] + (1.0f - momentum) * float(unbiased);
}

// totals[ch] = sum g, totals[c + ch] = sum g*(x - mean); dbeta and dgamma accumulate.
__global__ void backward_totals_kernel(const double* __restrict__ partial1, const double* __restrict__ partial2,
                                       int chunks, int c, const float* __restrict__ save_invstd,
                                       double* __restrict__ totals, float* __restrict__ dgamma,
                                       float* __restrict__ dbeta) {
  int ch;
  double sdy, sdyx;
  if (!fold_channel(partial1, partial2, chunks, c, ch, sdy, sdyx)) return;
  totals[ch] = sdy;
  totals[c + ch] = sdyx;
  dbeta[ch] += float(sdy);
  dgamma[ch] += float(sdyx * double(save_invstd[ch]));
}

// y = [relu](x * scale + shift [+ residual]) with, per channel,
//   Train: scale = gamma * invstd,            shift = beta - mean * scale (stat1 = mean, stat2 = invstd);
//   Eval:  scale = gamma / sqrt(var + eps),   shift = beta - mean * scale (running mean and var).
// Each thread keeps one channel (its scale and shift in registers) and walks rows.
template <bool Train>
__global__ void __launch_bounds__(kBnThreads)
    apply_kernel(const float* x, int64_t rows, int c, int tile_c, const float* __restrict__ gamma,
                 const float* __restrict__ beta, const float* __restrict__ stat1, const float* __restrict__ stat2,
                 float eps, const float* residual, bool relu, float* y) {
  const int tx = int(threadIdx.x) % tile_c, ty = int(threadIdx.x) / tile_c, lanes = kBnThreads / tile_c;
  const int ch = int(blockIdx.x) * tile_c + tx;
  if (ch >= c) return;
  const float scale = Train ? gamma[ch] * stat2[ch] : gamma[ch] / sqrtf(stat2[ch] + eps);
  const float shift = beta[ch] - stat1[ch] * scale;
  const int64_t step = int64_t(gridDim.y) * lanes;
  for (int64_t r = int64_t(blockIdx.y) * lanes + ty; r < rows; r += step) {
    const size_t o = size_t(r) * c + ch;
    float v = x[o] * scale + shift;
    if (residual) v += residual[o];
    if (relu) v = 0.0f < v ? v : 0.0f;
    y[o] = v;
  }
}

// dx = a*g + b*x + k per channel (the CPU's coefficients, from the double totals):
//   a = gamma*invstd, b = -a*invstd*sum(g*xhat)/rows, k = -a*sum(g)/rows - b*mean.
__global__ void __launch_bounds__(kBnThreads)
    backward_apply_kernel(const float* x, const float* dy, const float* relu_out, int64_t rows, int c, int tile_c,
                          const float* __restrict__ gamma, const float* __restrict__ save_mean,
                          const float* __restrict__ save_invstd, const double* __restrict__ totals, float* dx) {
  const int tx = int(threadIdx.x) % tile_c, ty = int(threadIdx.x) / tile_c, lanes = kBnThreads / tile_c;
  const int ch = int(blockIdx.x) * tile_c + tx;
  if (ch >= c) return;
  const double invstd = save_invstd[ch];
  const double inv_rows = 1.0 / double(rows);
  const double sum_dy_xhat = totals[c + ch] * invstd;
  const double a = double(gamma[ch]) * invstd;
  const double b = -a * invstd * sum_dy_xhat * inv_rows;
  const float ca = float(a), cb = float(b);
  const float ck = float(-a * totals[ch] * inv_rows - b * double(save_mean[ch]));
  const int64_t step = int64_t(gridDim.y) * lanes;
  for (int64_t r = int64_t(blockIdx.y) * lanes + ty; r < rows; r += step) {
    const size_t o = size_t(r) * c + ch;
    const float g = masked_grad(dy, relu_out, o);  // dx may alias dy: read before the write below
    dx[o] = ca * g + cb * x[o] + ck;
  }
}

unsigned warp_per_channel_blocks(int c) { return unsigned((size_t(c) * 32 + kBnThreads - 1) / kBnThreads); }

}  // namespace

void batchnorm_forward_train(const float* x, int64_t rows, int c, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* y, const float* residual, bool relu) {
  if (rows <= 0 || c <= 0) return;
  const ChannelGrid g = channel_grid(rows, c);
  double* partial1 = partials_buffer(2 * size_t(g.chunks) * c);
  double* partial2 = partial1 + size_t(g.chunks) * c;
  channel_partial_sums_kernel<false><<<dim3(g.channel_tiles, g.chunks), kBnThreads, 0, stream()>>>(
      x, nullptr, nullptr, nullptr, rows, c, g.tile_c, g.rows_per_chunk, partial1, partial2);
  CUDA_CHECK_LAUNCH();
  forward_stats_kernel<<<warp_per_channel_blocks(c), kBnThreads, 0, stream()>>>(
      partial1, partial2, g.chunks, c, rows, momentum, eps, running_mean, running_var, save_mean, save_invstd);
  CUDA_CHECK_LAUNCH();
  apply_kernel<true><<<apply_grid(g, rows), kBnThreads, 0, stream()>>>(x, rows, c, g.tile_c, gamma, beta, save_mean,
                                                                       save_invstd, 0.0f, residual, relu, y);
  CUDA_CHECK_LAUNCH();
}

void batchnorm_forward_eval(const float* x, int64_t rows, int c, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps, float* y,
                            const float* residual, bool relu) {
  if (rows <= 0 || c <= 0) return;
  const ChannelGrid g = channel_grid(rows, c);
  apply_kernel<false><<<apply_grid(g, rows), kBnThreads, 0, stream()>>>(x, rows, c, g.tile_c, gamma, beta,
                                                                        running_mean, running_var, eps, residual,
                                                                        relu, y);
  CUDA_CHECK_LAUNCH();
}

void batchnorm_backward(const float* x, const float* dy, const float* relu_out, int64_t rows, int c,
                        const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                        float* dgamma, float* dbeta, Arena& arena) {
  if (rows <= 0 || c <= 0) return;
  ArenaScope scope(arena);
  double* totals = static_cast<double*>(arena_bytes(arena, sizeof(double) * 2 * size_t(c)));
  const ChannelGrid g = channel_grid(rows, c);
  double* partial1 = partials_buffer(2 * size_t(g.chunks) * c);
  double* partial2 = partial1 + size_t(g.chunks) * c;
  channel_partial_sums_kernel<true><<<dim3(g.channel_tiles, g.chunks), kBnThreads, 0, stream()>>>(
      x, dy, relu_out, save_mean, rows, c, g.tile_c, g.rows_per_chunk, partial1, partial2);
  CUDA_CHECK_LAUNCH();
  backward_totals_kernel<<<warp_per_channel_blocks(c), kBnThreads, 0, stream()>>>(
      partial1, partial2, g.chunks, c, save_invstd, totals, dgamma, dbeta);
  CUDA_CHECK_LAUNCH();
  backward_apply_kernel<<<apply_grid(g, rows), kBnThreads, 0, stream()>>>(x, dy, relu_out, rows, c, g.tile_c, gamma,
                                                                          save_mean, save_invstd, totals, dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
