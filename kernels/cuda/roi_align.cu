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

// One output element: bin (ph, pw) of channel xb[0] (xb: the RoI's image at the channel; c apart).
__device__ __forceinline__ float pool_bin(const float* xb, int h, int w, int c, const RoiGeom& g, int ph, int pw) {
  float acc = 0.0f;
  for (int iy = 0; iy < g.grid_h; ++iy) {
    const float yy = sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
    for (int ix = 0; ix < g.grid_w; ++ix) {
      const Sample s = bilinear(h, w, yy, sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w));
      acc += s.wt[0] * xb[size_t(s.pix[0]) * c] + s.wt[1] * xb[size_t(s.pix[1]) * c] +
             s.wt[2] * xb[size_t(s.pix[2]) * c] + s.wt[3] * xb[size_t(s.pix[3]) * c];
    }
  }
  return acc / g.count;
}

// Its gradient gout added into the samples' pixels of dxb (as xb above).
__device__ __forceinline__ void scatter_bin(float* dxb, int h, int w, int c, const RoiGeom& g, int ph, int pw,
                                            float gout) {
  for (int iy = 0; iy < g.grid_h; ++iy) {
    const float yy = sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
    for (int ix = 0; ix < g.grid_w; ++ix) {
      const Sample s = bilinear(h, w, yy, sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w));
      for (int k = 0; k < 4; ++k)
        if (s.wt[k] != 0.0f) atomicAdd(dxb + size_t(s.pix[k]) * c, s.wt[k] * gout / g.count);
    }
  }
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
    y[e] = pool_bin(x + size_t(g.b) * h * w * c + ch, h, w, c, g, ph, pw);
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
    scatter_bin(dx + size_t(g.b) * h * w * c + ch, h, w, c, g, ph, pw, dy[e]);
  }
}

// The FPN's: each RoI's level first (fpn_roi_level's arithmetic, each operation rounded on its own),
// then the one-level element.
__device__ __forceinline__ int roi_level(const float* roi, const RoiLevels& L) {
  const double bw = fmaxf(0.0f, __fsub_rn(roi[3], roi[1])), bh = fmaxf(0.0f, __fsub_rn(roi[4], roi[2]));
  const double side = sqrt(__dmul_rn(bw, bh));
  double k = __dsub_rn(floor(__dadd_rn(4.0, log2(__dadd_rn(__ddiv_rn(side, double(L.canonical_size)), 1e-6)))),
                       double(L.finest));
  const double top = double(L.levels - 1);
  k = k < 0.0 ? 0.0 : (top < k ? top : k);
  return int(k);
}

// Output element e of the FPN's ops: its channel, bin, level and the RoI's geometry there.
struct LevelElement {
  int ch, ph, pw, level;
  RoiGeom g;
};
__device__ __forceinline__ LevelElement level_element(size_t e, const RoiLevels& L, int n, int c, int pooled,
                                                      int sampling_ratio, const float* rois) {
  LevelElement le;
  le.ch = int(e % size_t(c));
  size_t t = e / size_t(c);
  le.pw = int(t % size_t(pooled));
  t /= size_t(pooled);
  le.ph = int(t % size_t(pooled));
  const float* roi = rois + (t / size_t(pooled)) * 5;
  le.level = roi_level(roi, L);
  le.g = roi_geom(roi, n, pooled, pooled, L.spatial_scale[le.level], sampling_ratio, false);
  if (L.h[le.level] <= 0 || L.w[le.level] <= 0) le.g.b = -1;
  return le;
}

__global__ void roi_align_levels_forward_kernel(RoiLevels L, int n, int c, const float* __restrict__ rois, int num_rois,
                                                int pooled, int sampling_ratio, float* __restrict__ y) {
  const size_t total = size_t(num_rois) * pooled * pooled * c;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const LevelElement le = level_element(e, L, n, c, pooled, sampling_ratio, rois);
    const int h = L.h[le.level], w = L.w[le.level];
    y[e] =
        le.g.b < 0 ? 0.0f : pool_bin(L.x[le.level] + size_t(le.g.b) * h * w * c + le.ch, h, w, c, le.g, le.ph, le.pw);
  }
}

__global__ void roi_align_levels_backward_kernel(RoiLevels L, int n, int c, const float* __restrict__ rois,
                                                 int num_rois, int pooled, int sampling_ratio,
                                                 const float* __restrict__ dy) {
  const size_t total = size_t(num_rois) * pooled * pooled * c;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const LevelElement le = level_element(e, L, n, c, pooled, sampling_ratio, rois);
    if (le.g.b < 0) continue;
    const int h = L.h[le.level], w = L.w[le.level];
    scatter_bin(L.dx[le.level] + size_t(le.g.b) * h * w * c + le.ch, h, w, c, le.g, le.ph, le.pw, dy[e]);
  }
}

// Mask R-CNN's mask rows: each image's count and first row, in image order (one thread).
__global__ void mask_rows_kernel(int n, int per_image, const int32_t* __restrict__ row_first,
                                 const int32_t* __restrict__ fg_first, int32_t* __restrict__ mask_first) {
  mask_first[0] = 0;
  for (int i = 0; i < n; ++i) {
    int f = fg_first[i + 1] - fg_first[i];
    const int rows = row_first[i + 1] - row_first[i];
    f = f < per_image ? f : per_image;
    f = f < rows ? f : rows;
    mask_first[i + 1] = mask_first[i] + (f > 0 ? f : 0);
  }
}

// One block per mask row (past mask_first[n]: nothing), a thread per target pixel: the forward
// kernel's samples of the one-channel 0/1 mask, summed in the CPU's order (each product of a weight
// and a 0 or 1 is exact), so the threshold sees the CPU's value. A row whose instance is out of
// range gets label -1 (the mask loss flags it).
__global__ void mask_targets_kernel(const float* __restrict__ rois, const int32_t* __restrict__ row_first,
                                    const int32_t* __restrict__ labels, const int32_t* __restrict__ matched, int n,
                                    const uint8_t* __restrict__ gt_masks, const int32_t* __restrict__ gt_first, int h,
                                    int w, int m, const int32_t* __restrict__ mask_first, float* __restrict__ mask_rois,
                                    int32_t* __restrict__ mask_labels, uint8_t* __restrict__ targets) {
  const int o = int(blockIdx.x);
  if (o >= mask_first[n]) return;
  int img = 0;
  while (img + 1 < n && mask_first[img + 1] <= o) ++img;
  const int src = row_first[img] + (o - mask_first[img]);
  const float* roi = rois + size_t(src) * 5;
  const int g = matched[src];
  const bool ok = g >= 0 && g < gt_first[img + 1] - gt_first[img];
  if (threadIdx.x == 0) {
    for (int j = 0; j < 5; ++j) mask_rois[size_t(o) * 5 + j] = roi[j];
    mask_labels[o] = ok ? labels[src] : -1;
  }
  if (!ok) return;
  const uint8_t* mask = gt_masks + size_t(gt_first[img] + g) * size_t(h) * size_t(w);
  const float box[5] = {0.0f, roi[1], roi[2], roi[3], roi[4]};
  const RoiGeom geom = roi_geom(box, 1, m, m, 1.0f, 0, false);
  for (int q = int(threadIdx.x); q < m * m; q += int(blockDim.x)) {
    const int ph = q / m, pw = q % m;
    float acc = 0.0f;
    for (int iy = 0; iy < geom.grid_h; ++iy) {
      const float yy = sample_coord(geom.start_h, ph, geom.bin_h, iy, geom.grid_h);
      for (int ix = 0; ix < geom.grid_w; ++ix) {
        const Sample sm = bilinear(h, w, yy, sample_coord(geom.start_w, pw, geom.bin_w, ix, geom.grid_w));
        float v[4];
        for (int k = 0; k < 4; ++k) v[k] = mask[sm.pix[k]] ? 1.0f : 0.0f;
        const float term = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(sm.wt[0], v[0]), __fmul_rn(sm.wt[1], v[1])),
                                               __fmul_rn(sm.wt[2], v[2])),
                                     __fmul_rn(sm.wt[3], v[3]));
        acc = __fadd_rn(acc, term);
      }
    }
    targets[size_t(o) * m * m + q] = __fdiv_rn(acc, geom.count) >= 0.5f ? 1 : 0;
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

void rcnn_mask_targets(const float* rois, const int32_t* row_first, const int32_t* fg_first, const int32_t* labels,
                       const int32_t* matched, int n, int per_image, const uint8_t* gt_masks, const int32_t* gt_first,
                       int img_h, int img_w, int m, int max_rows, float* mask_rois, int32_t* mask_first,
                       int32_t* mask_labels, uint8_t* targets) {
  if (n < 0 || per_image < 0 || m <= 0 || img_h <= 0 || img_w <= 0)
    fail(__FILE__, __LINE__, "rcnn_mask_targets", "bad sizes");
  if (int64_t(max_rows) < int64_t(n) * per_image)
    fail(__FILE__, __LINE__, "rcnn_mask_targets", "max_rows below n * per_image");
  const size_t R = size_t(max_rows), MM = size_t(m) * size_t(m);
  if (R > 0) {
    CUDA_CHECK(cudaMemsetAsync(mask_rois, 0, R * 5 * sizeof(float), stream()));
    CUDA_CHECK(cudaMemsetAsync(mask_labels, 0, R * sizeof(int32_t), stream()));
    CUDA_CHECK(cudaMemsetAsync(targets, 0, R * MM, stream()));
  }
  if (n == 0) {
    CUDA_CHECK(cudaMemsetAsync(mask_first, 0, sizeof(int32_t), stream()));
    return;
  }
  mask_rows_kernel<<<1, 1, 0, stream()>>>(n, per_image, row_first, fg_first, mask_first);
  CUDA_CHECK_LAUNCH();
  if (R == 0) return;
  mask_targets_kernel<<<unsigned(R), kThreads, 0, stream()>>>(rois, row_first, labels, matched, n, gt_masks, gt_first,
                                                              img_h, img_w, m, mask_first, mask_rois, mask_labels,
                                                              targets);
  CUDA_CHECK_LAUNCH();
}

namespace {
// The FPN ops' element count, after checking the level count.
size_t levels_elements(const RoiLevels& levels, int c, int num_rois, int pooled) {
  if (levels.levels < 1 || levels.levels > kMaxRoiLevels)
    fail(__FILE__, __LINE__, "roi_align_levels", "levels outside [1, 8]");
  const size_t p = size_t(pooled > 0 ? pooled : 0);
  return size_t(num_rois > 0 ? num_rois : 0) * p * p * size_t(c > 0 ? c : 0);
}
}  // namespace

void roi_align_levels_forward(const RoiLevels& levels, int n, int c, const float* rois, int num_rois, int pooled,
                              int sampling_ratio, float* y) {
  const size_t total = levels_elements(levels, c, num_rois, pooled);
  if (total == 0) return;
  roi_align_levels_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(levels, n, c, rois, num_rois, pooled,
                                                                                sampling_ratio, y);
  CUDA_CHECK_LAUNCH();
}

void roi_align_levels_backward(const RoiLevels& levels, int n, int c, const float* rois, int num_rois, int pooled,
                               int sampling_ratio, const float* dy) {
  const size_t total = levels_elements(levels, c, num_rois, pooled);
  if (total == 0) return;
  roi_align_levels_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(levels, n, c, rois, num_rois, pooled,
                                                                                 sampling_ratio, dy);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
