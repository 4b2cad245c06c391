// Max, average and global average pooling over NHWC on the GPU, one thread per output element in
// the forward passes. The backward passes are gathers, one thread per INPUT element summing the
// outputs whose window covers it, in the CPU's (oh, ow) order: overlapping windows (3x3 stride 2)
// then need no atomics, every run gives the same bits, and the sums are those of
// kernels/cpu/pool.cpp. The max pool's argmax is recomputed from x with the CPU's rule (first
// maximum in scan order kh, then kw), so the gradient lands where the CPU puts it.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

// The pool's dims with the output size resolved on the host (PoolDims' methods are host code).
struct PoolShape {
  int n, h, w, c, k, stride, pad, out_h, out_w;
};

PoolShape shape_of(const PoolDims& d) { return {d.n, d.h, d.w, d.c, d.k, d.stride, d.pad, d.out_h(), d.out_w()}; }

__host__ __device__ size_t input_elems(const PoolShape& s) { return size_t(s.n) * s.h * s.w * s.c; }
__host__ __device__ size_t output_elems(const PoolShape& s) { return size_t(s.n) * s.out_h * s.out_w * s.c; }

// The outputs whose window covers input coordinate i along one axis: [lo, hi] (empty if lo > hi).
// Window o covers [o*stride - pad, o*stride - pad + k - 1].
__device__ __forceinline__ void covering_outputs(int i, int k, int stride, int pad, int out_n, int& lo, int& hi) {
  const int first = i + pad - k + 1;  // o*stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = min((i + pad) / stride, out_n - 1);  // i + pad >= 0
}

// Input offset (channel 0) of pixel (img, ih, iw).
__device__ __forceinline__ size_t pixel(const PoolShape& s, int img, int ih, int iw) {
  return ((size_t(img) * s.h + ih) * s.w + iw) * s.c;
}

__global__ void maxpool_forward_kernel(PoolShape s, const float* __restrict__ x, float* __restrict__ y) {
  const size_t total = output_elems(s);
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int j = int(i % s.c);
    size_t p = i / s.c;
    const int ow = int(p % s.out_w);
    p /= s.out_w;
    const int oh = int(p % s.out_h);
    const int img = int(p / s.out_h);
    float best = -INFINITY;  // a window of padding only stays -inf, as on the CPU
    for (int kh = 0; kh < s.k; ++kh) {
      const int ih = oh * s.stride - s.pad + kh;
      if (ih < 0 || ih >= s.h) continue;
      for (int kw = 0; kw < s.k; ++kw) {
        const int iw = ow * s.stride - s.pad + kw;
        if (iw < 0 || iw >= s.w) continue;
        const float v = x[pixel(s, img, ih, iw) + j];
        best = best < v ? v : best;  // std::max(best, v)
      }
    }
    y[i] = best;
  }
}

__global__ void maxpool_backward_kernel(PoolShape s, const float* __restrict__ x, const float* __restrict__ dy,
                                        float* __restrict__ dx) {
  const size_t total = input_elems(s);
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int j = int(i % s.c);
    size_t p = i / s.c;
    const int iw = int(p % s.w);
    p /= s.w;
    const int ih = int(p % s.h);
    const int img = int(p / s.h);
    int oh_lo, oh_hi, ow_lo, ow_hi;
    covering_outputs(ih, s.k, s.stride, s.pad, s.out_h, oh_lo, oh_hi);
    covering_outputs(iw, s.k, s.stride, s.pad, s.out_w, ow_lo, ow_hi);
    float acc = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
      for (int ow = ow_lo; ow <= ow_hi; ++ow) {
        // The window's first maximum, scanned as the CPU does.
        float best = 0.0f;
        int arg_h = -1, arg_w = -1;
        for (int kh = 0; kh < s.k; ++kh) {
          const int wh = oh * s.stride - s.pad + kh;
          if (wh < 0 || wh >= s.h) continue;
          for (int kw = 0; kw < s.k; ++kw) {
            const int ww = ow * s.stride - s.pad + kw;
            if (ww < 0 || ww >= s.w) continue;
            const float v = x[pixel(s, img, wh, ww) + j];
            if (arg_h < 0 || v > best) {  // strict: the first maximum wins ties
              best = v;
              arg_h = wh;
              arg_w = ww;
            }
          }
        }
        if (arg_h == ih && arg_w == iw) acc += dy[((size_t(img) * s.out_h + oh) * s.out_w + ow) * s.c + j];
      }
    dx[i] = acc;
  }
}

__global__ void avgpool_forward_kernel(PoolShape s, float inv, const float* __restrict__ x, float* __restrict__ y) {
  const size_t total = output_elems(s);
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int j = int(i % s.c);
    size_t p = i / s.c;
    const int ow = int(p % s.out_w);
    p /= s.out_w;
    const int oh = int(p % s.out_h);
    const int img = int(p / s.out_h);
    float sum = 0.0f;
    for (int kh = 0; kh < s.k; ++kh) {
      const int ih = oh * s.stride - s.pad + kh;
      if (ih < 0 || ih >= s.h) continue;
      for (int kw = 0; kw < s.k; ++kw) {
        const int iw = ow * s.stride - s.pad + kw;
        if (iw < 0 || iw >= s.w) continue;
        sum += x[pixel(s, img, ih, iw) + j];
      }
    }
    y[i] = sum * inv;  // padding counts in the divisor (count_include_pad)
  }
}

__global__ void avgpool_backward_kernel(PoolShape s, float inv, const float* __restrict__ dy, float* __restrict__ dx) {
  const size_t total = input_elems(s);
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int j = int(i % s.c);
    size_t p = i / s.c;
    const int iw = int(p % s.w);
    p /= s.w;
    const int ih = int(p % s.h);
    const int img = int(p / s.h);
    int oh_lo, oh_hi, ow_lo, ow_hi;
    covering_outputs(ih, s.k, s.stride, s.pad, s.out_h, oh_lo, oh_hi);
    covering_outputs(iw, s.k, s.stride, s.pad, s.out_w, ow_lo, ow_hi);
    float acc = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
      for (int ow = ow_lo; ow <= ow_hi; ++ow)  // unfused multiply-add, as the CPU rounds it
        acc += __fmul_rn(dy[((size_t(img) * s.out_h + oh) * s.out_w + ow) * s.c + j], inv);
    dx[i] = acc;
  }
}

// y[img, j] = mean over the hw pixels of x[img, :, j]; consecutive threads take consecutive
// channels, so the loads of a warp are contiguous.
__global__ void global_avgpool_forward_kernel(const float* __restrict__ x, int n, int hw, int c, float inv,
                                              float* __restrict__ y) {
  const size_t total = size_t(n) * c;
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const size_t img = i / c, j = i % c;
    const float* xi = x + img * hw * c + j;
    float sum = 0.0f;
    for (int p = 0; p < hw; ++p) sum += xi[size_t(p) * c];
    y[i] = sum * inv;
  }
}

__global__ void global_avgpool_backward_kernel(const float* __restrict__ dy, int n, int hw, int c, float inv,
                                               float* __restrict__ dx) {
  const size_t total = size_t(n) * hw * c;
  const size_t per_image = size_t(hw) * c;
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step)
    dx[i] = dy[(i / per_image) * c + i % c] * inv;
}

}  // namespace

void maxpool_forward(const PoolDims& d, const float* x, float* y) {
  const PoolShape s = shape_of(d);
  if (s.out_h <= 0 || s.out_w <= 0) return;
  const size_t total = output_elems(s);
  if (total == 0) return;
  maxpool_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(s, x, y);
  CUDA_CHECK_LAUNCH();
}

void maxpool_backward(const PoolDims& d, const float* x, const float* dy, float* dx) {
  const PoolShape s = shape_of(d);
  const size_t total = input_elems(s);
  if (total == 0) return;
  maxpool_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(s, x, dy, dx);
  CUDA_CHECK_LAUNCH();
}

void avgpool_forward(const PoolDims& d, const float* x, float* y) {
  const PoolShape s = shape_of(d);
  if (s.out_h <= 0 || s.out_w <= 0) return;
  const size_t total = output_elems(s);
  if (total == 0) return;
  avgpool_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(s, 1.0f / float(d.k * d.k), x, y);
  CUDA_CHECK_LAUNCH();
}

void avgpool_backward(const PoolDims& d, const float* dy, float* dx) {
  const PoolShape s = shape_of(d);
  const size_t total = input_elems(s);
  if (total == 0) return;
  avgpool_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(s, 1.0f / float(d.k * d.k), dy, dx);
  CUDA_CHECK_LAUNCH();
}

void global_avgpool_forward(const float* x, int n, int hw, int c, float* y) {
  const size_t total = size_t(n) * c;
  if (n <= 0 || c <= 0) return;
  global_avgpool_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x, n, hw, c, 1.0f / float(hw), y);
  CUDA_CHECK_LAUNCH();
}

void global_avgpool_backward(const float* dy, int n, int hw, int c, float* dx) {
  if (n <= 0 || hw <= 0 || c <= 0) return;
  const size_t total = size_t(n) * hw * c;
  global_avgpool_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(dy, n, hw, c, 1.0f / float(hw), dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
