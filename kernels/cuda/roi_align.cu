// RoIAlign (Mask R-CNN) over NHWC features on the GPU, with the CPU's semantics
// (kernels/cpu/roi_align.cpp, torchvision's roi_align). A thread per output element (roi, bin,
// channel): consecutive threads take consecutive channels of one bin, so the gathers (forward) and
// the atomic adds into dx (backward) of a warp touch contiguous floats. The RoI geometry and the
// sample positions are computed with each operation rounded on its own (__f*_rn), in the CPU's
// order, so both devices take the same samples with the same weights; only the sums differ in
// rounding. The backward's atomics make dx's last bits depend on the order of arrival.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

struct RoiGeom {
  int b;
  float start_h, start_w, bin_h, bin_w;
  int grid_h, grid_w;
  float count;
};

__device__ RoiGeom roi_geom(const float* roi, int n, int pooled_h, int pooled_w, float spatial_scale,
                            int sampling_ratio, bool aligned) {
  RoiGeom g;
  const float offset = aligned ? 0.5f : 0.0f;
  const int b = int(roi[0]);
  g.b = b >= 0 && b < n ? b : -1;
  g.start_w = __fsub_rn(__fmul_rn(roi[1], spatial_scale), offset);
  g.start_h = __fsub_rn(__fmul_rn(roi[2], spatial_scale), offset);
  const float end_w = __fsub_rn(__fmul_rn(roi[3], spatial_scale), offset);
  const float end_h = __fsub_rn(__fmul_rn(roi[4], spatial_scale), offset);
  float roi_w = __fsub_rn(end_w, g.start_w), roi_h = __fsub_rn(end_h, g.start_h);
  if (!aligned) {
    roi_w = fmaxf(roi_w, 1.0f);
    roi_h = fmaxf(roi_h, 1.0f);
  }
  g.bin_h = __fdiv_rn(roi_h, float(pooled_h));
  g.bin_w = __fdiv_rn(roi_w, float(pooled_w));
  g.grid_h = sampling_ratio > 0 ? sampling_ratio : int(ceilf(__fdiv_rn(roi_h, float(pooled_h))));
  g.grid_w = sampling_ratio > 0 ? sampling_ratio : int(ceilf(__fdiv_rn(roi_w, float(pooled_w))));
  g.count = float(max(g.grid_h * g.grid_w, 1));
  return g;
}

struct Sample {
  int pix[4];
  float wt[4];
};

__device__ Sample bilinear(int h, int w, float y, float x) {
  Sample s{{0, 0, 0, 0}, {0.0f, 0.0f, 0.0f, 0.0f}};
  if (y < -1.0f || y > float(h) || x < -1.0f || x > float(w)) return s;
  y = fmaxf(y, 0.0f);
  x = fmaxf(x, 0.0f);
  int y_low = int(y), x_low = int(x), y_high, x_high;
  if (y_low >= h - 1) {
    y_high = y_low = h - 1;
    y = float(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= w - 1) {
    x_high = x_low = w - 1;
    x = float(x_low);
  } else {
    x_high = x_low + 1;
  }
  const float ly = __fsub_rn(y, float(y_low)), lx = __fsub_rn(x, float(x_low));
  const float hy = __fsub_rn(1.0f, ly), hx = __fsub_rn(1.0f, lx);
  s.pix[0] = y_low * w + x_low;
  s.pix[1] = y_low * w + x_high;
  s.pix[2] = y_high * w + x_low;
  s.pix[3] = y_high * w + x_high;
  s.wt[0] = __fmul_rn(hy, hx);
  s.wt[1] = __fmul_rn(hy, lx);
  s.wt[2] = __fmul_rn(ly, hx);
  s.wt[3] = __fmul_rn(ly, lx);
  return s;
}

// y = start + ph * bin + (iy + 0.5) * bin / grid, left to right, as the CPU.
__device__ __forceinline__ float sample_coord(float start, int ph, float bin, int iy, int grid) {
  return __fadd_rn(__fadd_rn(start, __fmul_rn(float(ph), bin)),
                   __fdiv_rn(__fmul_rn(float(iy + 0.5f), bin), float(grid)));
}

__global__ void roi_align_forward_kernel(const float* __restrict__ x, int n, int h, int w, int c,
                                         const float* __restrict__ rois, int num_rois, int pooled_h, int pooled_w,
                                         float spatial_scale, int sampling_ratio, bool aligned, float* __restrict__ y) {
  const size_t total = size_t(num_rois) * pooled_h * pooled_w * c;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const int ch = int(e % size_t(c));
    size_t t = e / size_t(c);
    const int pw = int(t % size_t(pooled_w));
    t /= size_t(pooled_w);
    const int ph = int(t % size_t(pooled_h));
    const int r = int(t / size_t(pooled_h));
    const RoiGeom g = roi_geom(rois + size_t(r) * 5, n, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
    if (g.b < 0) {
      y[e] = 0.0f;
      continue;
    }
    const float* xb = x + size_t(g.b) * h * w * c + ch;
    float acc = 0.0f;
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const float yy = sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const Sample s = bilinear(h, w, yy, sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w));
        acc += s.wt[0] * xb[size_t(s.pix[0]) * c] + s.wt[1] * xb[size_t(s.pix[1]) * c] +
               s.wt[2] * xb[size_t(s.pix[2]) * c] + s.wt[3] * xb[size_t(s.pix[3]) * c];
      }
    }
    y[e] = acc / g.count;
  }
}

__global__ void roi_align_backward_kernel(const float* __restrict__ dy, int n, int h, int w, int c,
                                          const float* __restrict__ rois, int num_rois, int pooled_h, int pooled_w,
                                          float spatial_scale, int sampling_ratio, bool aligned,
                                          float* __restrict__ dx) {
  const size_t total = size_t(num_rois) * pooled_h * pooled_w * c;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const int ch = int(e % size_t(c));
    size_t t = e / size_t(c);
    const int pw = int(t % size_t(pooled_w));
    t /= size_t(pooled_w);
    const int ph = int(t % size_t(pooled_h));
    const int r = int(t / size_t(pooled_h));
    const RoiGeom g = roi_geom(rois + size_t(r) * 5, n, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
    if (g.b < 0) continue;
    float* dxb = dx + size_t(g.b) * h * w * c + ch;
    const float gout = dy[e];
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const float yy = sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const Sample s = bilinear(h, w, yy, sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w));
        for (int k = 0; k < 4; ++k)
          if (s.wt[k] != 0.0f) atomicAdd(dxb + size_t(s.pix[k]) * c, s.wt[k] * gout / g.count);
      }
    }
  }
}

}  // namespace

void roi_align_forward(const float* x, int n, int h, int w, int c, const float* rois, int num_rois, int pooled_h,
                       int pooled_w, float spatial_scale, int sampling_ratio, bool aligned, float* y) {
  const size_t total = size_t(num_rois > 0 ? num_rois : 0) * size_t(pooled_h > 0 ? pooled_h : 0) *
                       size_t(pooled_w > 0 ? pooled_w : 0) * size_t(c > 0 ? c : 0);
  if (total == 0) return;
  if (h <= 0 || w <= 0) {
    CUDA_CHECK(cudaMemsetAsync(y, 0, total * sizeof(float), stream()));
    return;
  }
  roi_align_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
      x, n, h, w, c, rois, num_rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned, y);
  CUDA_CHECK_LAUNCH();
}

void roi_align_backward(const float* dy, int n, int h, int w, int c, const float* rois, int num_rois, int pooled_h,
                        int pooled_w, float spatial_scale, int sampling_ratio, bool aligned, float* dx) {
  const size_t total = size_t(num_rois > 0 ? num_rois : 0) * size_t(pooled_h > 0 ? pooled_h : 0) *
                       size_t(pooled_w > 0 ? pooled_w : 0) * size_t(c > 0 ? c : 0);
  if (total == 0 || h <= 0 || w <= 0) return;
  roi_align_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
      dy, n, h, w, c, rois, num_rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned, dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
