// Our own convolution kernel, the path where cuDNN is not built (and, with MLPD_CUDA_CONV=implicit,
// a second path that tests on a GPU can hold against cuDNN): each pass is a GEMM whose operands
// are gathered from the NHWC tensors while the tiles are loaded, so no im2col buffer is written.
//   forward         y [n*oh*ow, c_out]  = im2col(x) [.., k*k*c_in]  * w [k*k*c_in, c_out]
//   backward data   dx[n*h*w, c_in]     = gather(dy)[.., k*k*c_out] * w^T (w read as [tap, co] x ci)
//   backward wts    dw[k*k*c_in, c_out] += im2col(x)^T [.., n*oh*ow] * dy [n*oh*ow, c_out]
// One kernel does all three: 64x64 tiles of C, 256 threads each holding a 4x4 block in registers,
// K in steps of 16 through shared memory, the next step's global loads issued before the current
// step's FMAs. Each pass supplies a Tiles struct saying how its A and B elements are found; the
// thread-to-element mapping of each load is chosen so that a warp reads contiguous floats.
// Backward weights reduces over every output pixel while its C is small, so K is split into
// slices that run in parallel, each writing a partial C to the arena; the partials are then added
// in slice order, so the result does not depend on scheduling (no atomics).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_paths.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int kGemmThreads = 256;  // 16 x 16 threads, each a 4 x 4 block of the 64 x 64 tile
constexpr int kSmemPad = 4;        // row padding: keeps float4 alignment, spreads the tile stores
constexpr int64_t kSplitTargetBlocks = 512;       // backward weights: blocks wanted in flight
constexpr int64_t kMinKPerSplit = 256;            // ...each slice at least this many pixels
constexpr int64_t kMaxSplitFloats = int64_t(1) << 24;  // ...and the partials at most 64 MiB

using SmemA = float[kTileK][kTileM + kSmemPad];  // A tile stored k-major: As[k][m]
using SmemB = float[kTileK][kTileN + kSmemPad];  // B tile: Bs[k][n]

// The convolution for the kernels, output size resolved on the host (ConvDims' methods are host code).
struct ConvShape {
  int n, h, w, c_in, c_out, k, stride, pad, out_h, out_w;
};

// ---- Where each pass finds its operands. A Tiles struct is built per thread with the block's
// tile origin; load() fetches this thread's 4 A and 4 B elements of the K step starting at k0
// (zero past k_end or outside the tensors) into registers, store() puts them in shared memory.

// Forward. A[m, kk] = x[img, oh*s - p + kh, ow*s - p + kw, ci], m = (img*oh_n + oh)*ow_n + ow,
// kk = (kh*k + kw)*c_in + ci. B[kk, co] = w[kk*c_out + co] (HWIO is already [K, N]).
// A is loaded k-fastest (ci contiguous in x), B n-fastest (co contiguous in w).
struct ForwardTiles {
  const float* x;
  const float* w;
  ConvShape s;
  int a_k, a_row;       // A: tile column a_k, rows a_row + 16*i
  int64_t a_image[4];   // offset of each row's image in x; -1 for rows past the end
  int a_ih0[4], a_iw0[4];
  int b_col, b_row, b_n;  // B: tile column b_col (global b_n), rows b_row + 4*i

  __device__ ForwardTiles(const float* x_, const float* w_, const ConvShape& s_, int m0, int n0, int tid)
      : x(x_), w(w_), s(s_) {
    const int m_count = s.n * s.out_h * s.out_w;
    a_k = tid % kTileK;
    a_row = tid / kTileK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + a_row + 16 * i;
      a_image[i] = -1;
      a_ih0[i] = a_iw0[i] = 0;
      if (m < m_count) {
        const int ow = m % s.out_w, t = m / s.out_w;
        const int oh = t % s.out_h, img = t / s.out_h;
        a_image[i] = int64_t(img) * s.h * s.w * s.c_in;
        a_ih0[i] = oh * s.stride - s.pad;
        a_iw0[i] = ow * s.stride - s.pad;
      }
    }
    b_col = tid % kTileN;
    b_row = tid / kTileN;
    b_n = n0 + b_col;
  }

  __device__ void load(int k0, int k_end, float (&ra)[4], float (&rb)[4]) const {
    const int kk = k0 + a_k;
    if (kk < k_end) {
      const int ci = kk % s.c_in, tap = kk / s.c_in;
      const int kw = tap % s.k, kh = tap / s.k;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int ih = a_ih0[i] + kh, iw = a_iw0[i] + kw;
        const bool inside = a_image[i] >= 0 && unsigned(ih) < unsigned(s.h) && unsigned(iw) < unsigned(s.w);
        ra[i] = inside ? x[a_image[i] + (int64_t(ih) * s.w + iw) * s.c_in + ci] : 0.0f;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) ra[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kr = k0 + b_row + 4 * i;
      rb[i] = kr < k_end && b_n < s.c_out ? w[int64_t(kr) * s.c_out + b_n] : 0.0f;
    }
  }

  __device__ void store(SmemA& as, SmemB& bs, const float (&ra)[4], const float (&rb)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      as[a_k][a_row + 16 * i] = ra[i];
      bs[b_row + 4 * i][b_col] = rb[i];
    }
  }
};

// Backward data. Rows are input pixels m = (img*h + ih)*w + iw, columns ci, kk = (kh*k + kw)*c_out + co:
// A[m, kk] = dy[img, oh, ow, co] where oh*s = ih + p - kh and ow*s = iw + p - kw (zero where that
// is not a whole output pixel); B[kk, ci] = w[kh, kw, ci, co]. Both are loaded k-fastest (co is
// contiguous in dy and in w), and both use the same kk per thread.
struct BackwardDataTiles {
  const float* dy;
  const float* w;
  ConvShape s;
  int k_col, row;       // tile column k_col; A rows and B columns row + 16*i
  int n0;
  int64_t a_image[4];   // offset of each row's image in dy; -1 for rows past the end
  int a_ihp[4], a_iwp[4];  // ih + pad, iw + pad

  __device__ BackwardDataTiles(const float* dy_, const float* w_, const ConvShape& s_, int m0, int n0_, int tid)
      : dy(dy_), w(w_), s(s_), n0(n0_) {
    const int m_count = s.n * s.h * s.w;
    k_col = tid % kTileK;
    row = tid / kTileK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + row + 16 * i;
      a_image[i] = -1;
      a_ihp[i] = a_iwp[i] = 0;
      if (m < m_count) {
        const int iw = m % s.w, t = m / s.w;
        const int ih = t % s.h, img = t / s.h;
        a_image[i] = int64_t(img) * s.out_h * s.out_w * s.c_out;
        a_ihp[i] = ih + s.pad;
        a_iwp[i] = iw + s.pad;
      }
    }
  }

  __device__ void load(int k0, int k_end, float (&ra)[4], float (&rb)[4]) const {
    const int kk = k0 + k_col;
    if (kk >= k_end) {
#pragma unroll
      for (int i = 0; i < 4; ++i) ra[i] = rb[i] = 0.0f;
      return;
    }
    const int co = kk % s.c_out, tap = kk / s.c_out;
    const int kw = tap % s.k, kh = tap / s.k;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int th = a_ihp[i] - kh, tw = a_iwp[i] - kw;  // = oh*stride, ow*stride when they exist
      float v = 0.0f;
      if (a_image[i] >= 0 && th >= 0 && tw >= 0 && th % s.stride == 0 && tw % s.stride == 0) {
        const int oh = th / s.stride, ow = tw / s.stride;
        if (oh < s.out_h && ow < s.out_w) v = dy[a_image[i] + (int64_t(oh) * s.out_w + ow) * s.c_out + co];
      }
      ra[i] = v;
      const int ci = n0 + row + 16 * i;
      rb[i] = ci < s.c_in ? w[(int64_t(tap) * s.c_in + ci) * s.c_out + co] : 0.0f;
    }
  }

  __device__ void store(SmemA& as, SmemB& bs, const float (&ra)[4], const float (&rb)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      as[k_col][row + 16 * i] = ra[i];
      bs[k_col][row + 16 * i] = rb[i];
    }
  }
};

// Backward weights. Rows m = (kh*k + kw)*c_in + ci (dw is HWIO = [M, c_out]), K runs over output
// pixels r = (img*oh_n + oh)*ow_n + ow: A[m, r] = x[img, oh*s - p + kh, ow*s - p + kw, ci],
// B[r, co] = dy[r*c_out + co]. A is loaded m-fastest (ci contiguous in x), B n-fastest; both
// use the same r per thread.
struct BackwardWeightsTiles {
  const float* x;
  const float* dy;
  ConvShape s;
  int col, row;         // tile column col (A's m, B's n); K rows row + 4*i
  bool a_valid;
  int a_kh, a_kw, a_ci;
  int b_n;

  __device__ BackwardWeightsTiles(const float* x_, const float* dy_, const ConvShape& s_, int m0, int n0, int tid)
      : x(x_), dy(dy_), s(s_) {
    col = tid % kTileM;
    row = tid / kTileM;
    const int m = m0 + col;
    a_valid = m < s.k * s.k * s.c_in;
    const int tap = m / s.c_in;
    a_ci = m % s.c_in;
    a_kw = tap % s.k;
    a_kh = tap / s.k;
    b_n = n0 + col;
  }

  __device__ void load(int k0, int k_end, float (&ra)[4], float (&rb)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = k0 + row + 4 * i;
      ra[i] = rb[i] = 0.0f;
      if (r < k_end) {
        const int ow = r % s.out_w, t = r / s.out_w;
        const int oh = t % s.out_h, img = t / s.out_h;
        const int ih = oh * s.stride - s.pad + a_kh, iw = ow * s.stride - s.pad + a_kw;
        if (a_valid && unsigned(ih) < unsigned(s.h) && unsigned(iw) < unsigned(s.w))
          ra[i] = x[((int64_t(img) * s.h + ih) * s.w + iw) * s.c_in + a_ci];
        if (b_n < s.c_out) rb[i] = dy[int64_t(r) * s.c_out + b_n];
      }
    }
  }

  __device__ void store(SmemA& as, SmemB& bs, const float (&ra)[4], const float (&rb)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      as[row + 4 * i][col] = ra[i];
      bs[row + 4 * i][col] = rb[i];
    }
  }
};

// C[M, N] (row-major, ld N) = A * B over K slice blockIdx.z ([z*k_per_split, +k_per_split)), into
// out + z*split_stride; with `accumulate` C is added to what out holds, else it overwrites it.
template <class Tiles>
__global__ void __launch_bounds__(kGemmThreads)
    implicit_gemm_kernel(const float* a_src, const float* b_src, ConvShape s, int m_count, int n_count, int k_count,
                         int k_per_split, float* out, size_t split_stride, bool accumulate) {
  __shared__ __align__(16) SmemA as;
  __shared__ __align__(16) SmemB bs;
  const int tid = int(threadIdx.x);
  const int m0 = int(blockIdx.x) * kTileM, n0 = int(blockIdx.y) * kTileN;
  const int k_begin = int(blockIdx.z) * k_per_split;
  const int k_end = min(k_count, k_begin + k_per_split);
  const Tiles tiles(a_src, b_src, s, m0, n0, tid);
  const int ty = tid / 16, tx = tid % 16;  // this thread's C block: rows ty*4.., columns tx*4..

  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  float ra[4], rb[4];
  if (k_begin < k_end) tiles.load(k_begin, k_end, ra, rb);
  for (int k0 = k_begin; k0 < k_end; k0 += kTileK) {
    tiles.store(as, bs, ra, rb);
    __syncthreads();
    if (k0 + kTileK < k_end) tiles.load(k0 + kTileK, k_end, ra, rb);  // in flight during the FMAs
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 a4 = *reinterpret_cast<const float4*>(&as[kk][ty * 4]);
      const float4 b4 = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
      const float av[4] = {a4.x, a4.y, a4.z, a4.w};
      const float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();  // the next store overwrites the tiles
  }

  float* c = out + size_t(blockIdx.z) * split_stride;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty * 4 + i;
    if (m >= m_count) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx * 4 + j;
      if (n >= n_count) break;
      float* p = c + int64_t(m) * n_count + n;
      *p = accumulate ? *p + acc[i][j] : acc[i][j];
    }
  }
}

// dw[i] += the slices' partials at i, added in slice order.
__global__ void sum_slices_kernel(const float* __restrict__ partials, int slices, size_t count, float* __restrict__ dw) {
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    float sum = 0.0f;
    for (int z = 0; z < slices; ++z) sum += partials[size_t(z) * count + i];
    dw[i] += sum;
  }
}

ConvShape shape_of(const ConvDims& d) {
  return {d.n, d.h, d.w, d.c_in, d.c_out, d.k, d.stride, d.pad, d.out_h(), d.out_w()};
}

// The kernels index GEMM rows, columns and K in int: refuse shapes that would overflow.
int checked_int(int64_t v, const char* what) {
  if (v > INT_MAX / 2)
    throw std::runtime_error(std::string("implicit GEMM convolution: ") + what + " = " + std::to_string(v) +
                             " is too large for 32-bit indexing");
  return int(v);
}

template <class Tiles>
void launch_implicit_gemm(const float* a_src, const float* b_src, const ConvShape& s, int m_count, int n_count,
                          int k_count, int slices, int k_per_split, float* out, bool accumulate) {
  const dim3 grid(unsigned((m_count + kTileM - 1) / kTileM), unsigned((n_count + kTileN - 1) / kTileN),
                  unsigned(slices));
  implicit_gemm_kernel<Tiles><<<grid, kGemmThreads, 0, stream()>>>(a_src, b_src, s, m_count, n_count, k_count,
                                                                   k_per_split, out, size_t(m_count) * n_count,
                                                                   accumulate);
  CUDA_CHECK_LAUNCH();
}

// How backward weights cuts K: a function of the shape only, so the sums are the same every run.
struct KSplit {
  int slices = 1, k_per_slice = 0;
};

KSplit weights_split(const ConvShape& s) {
  const int64_t m = int64_t(s.k) * s.k * s.c_in, n = s.c_out;
  const int64_t k = int64_t(s.n) * s.out_h * s.out_w;
  const int64_t tiles = ((m + kTileM - 1) / kTileM) * ((n + kTileN - 1) / kTileN);
  int64_t slices = (kSplitTargetBlocks + tiles - 1) / tiles;
  slices = std::min(slices, std::max<int64_t>(1, k / kMinKPerSplit));
  slices = std::min(slices, std::max<int64_t>(1, kMaxSplitFloats / (m * n)));
  slices = std::max<int64_t>(1, slices);
  int64_t per = (k + slices - 1) / slices;
  per = (per + kTileK - 1) / kTileK * kTileK;
  KSplit split;
  split.k_per_slice = int(per);
  split.slices = int((k + per - 1) / per);
  return split;
}

bool empty_gemm(const ConvShape& s) {
  return s.n <= 0 || s.h <= 0 || s.w <= 0 || s.c_in <= 0 || s.c_out <= 0 || s.k <= 0 || s.stride <= 0 ||
         s.out_h <= 0 || s.out_w <= 0;
}

}  // namespace

size_t implicit_conv_scratch_floats(const ConvDims& d) {
  const ConvShape s = shape_of(d);
  if (empty_gemm(s)) return 0;
  const KSplit split = weights_split(s);
  if (split.slices <= 1) return 0;
  return size_t(split.slices) * size_t(s.k) * s.k * s.c_in * s.c_out + 16;  // + arena alignment
}

void implicit_conv_forward(const ConvDims& d, const float* x, const float* w, float* y) {
  const ConvShape s = shape_of(d);
  if (empty_gemm(s)) return;
  const int m = checked_int(int64_t(s.n) * s.out_h * s.out_w, "n*out_h*out_w");
  const int k = checked_int(int64_t(s.k) * s.k * s.c_in, "k*k*c_in");
  launch_implicit_gemm<ForwardTiles>(x, w, s, m, s.c_out, k, 1, k, y, false);
}

void implicit_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, bool accumulate) {
  const ConvShape s = shape_of(d);
  if (empty_gemm(s)) return;
  const int m = checked_int(int64_t(s.n) * s.h * s.w, "n*h*w");
  const int k = checked_int(int64_t(s.k) * s.k * s.c_out, "k*k*c_out");
  launch_implicit_gemm<BackwardDataTiles>(dy, w, s, m, s.c_in, k, 1, k, dx, accumulate);
}

void implicit_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena) {
  const ConvShape s = shape_of(d);
  if (empty_gemm(s)) return;
  const int m = checked_int(int64_t(s.k) * s.k * s.c_in, "k*k*c_in");
  const int k = checked_int(int64_t(s.n) * s.out_h * s.out_w, "n*out_h*out_w");
  const KSplit split = weights_split(s);
  if (split.slices == 1) {
    launch_implicit_gemm<BackwardWeightsTiles>(x, dy, s, m, s.c_out, k, 1, split.k_per_slice, dw, true);
    return;
  }
  ArenaScope scope(arena);
  const size_t count = size_t(m) * s.c_out;
  float* partials = arena_floats(arena, size_t(split.slices) * count);
  launch_implicit_gemm<BackwardWeightsTiles>(x, dy, s, m, s.c_out, k, split.slices, split.k_per_slice, partials,
                                             false);
  sum_slices_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(partials, split.slices, count, dw);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
