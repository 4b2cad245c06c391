// RoIAlign (Mask R-CNN) over NHWC features on the CPU, forward and backward, as torchvision's
// roi_align (Detectron's RoIAlign with aligned=false): each output bin averages grid_h x grid_w
// bilinear samples at the centres of a regular sub-grid of the bin. NHWC puts a pixel's channels
// side by side, so a sample's four corners and weights are found once and applied to c contiguous
// floats. The sample positions are computed without fused multiply-adds, in the order the CUDA
// kernels (kernels/cuda/roi_align.cu) use, so both devices take the same samples (the sample grid
// depends on a ceil and the corners on a floor: an ulp could move them).
// The backward scatters into dx in a fixed order (roi, bin, sample, channel): deterministic.
#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma clang fp contract(off)
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

// One RoI's geometry in feature-map pixels.
struct RoiGeom {
  int b;                   // image, -1 if out of range (output 0, no gradient)
  float start_h, start_w;  // top-left corner
  float bin_h, bin_w;      // bin size
  int grid_h, grid_w;      // samples per bin side
  float count;             // samples per bin (at least 1)
};

RoiGeom roi_geom(const float* roi, int n, int pooled_h, int pooled_w, float spatial_scale, int sampling_ratio,
                 bool aligned) {
  RoiGeom g;
  const float offset = aligned ? 0.5f : 0.0f;
  const int b = int(roi[0]);
  g.b = b >= 0 && b < n ? b : -1;
  g.start_w = roi[1] * spatial_scale - offset;
  g.start_h = roi[2] * spatial_scale - offset;
  const float end_w = roi[3] * spatial_scale - offset, end_h = roi[4] * spatial_scale - offset;
  float roi_w = end_w - g.start_w, roi_h = end_h - g.start_h;
  if (!aligned) {  // Detectron v1: a malformed RoI becomes 1x1
    roi_w = std::max(roi_w, 1.0f);
    roi_h = std::max(roi_h, 1.0f);
  }
  g.bin_h = roi_h / float(pooled_h);
  g.bin_w = roi_w / float(pooled_w);
  g.grid_h = sampling_ratio > 0 ? sampling_ratio : int(std::ceil(roi_h / float(pooled_h)));
  g.grid_w = sampling_ratio > 0 ? sampling_ratio : int(std::ceil(roi_w / float(pooled_w)));
  g.count = float(std::max(g.grid_h * g.grid_w, 1));
  return g;
}

// A bilinear sample: the four pixels (y*w + x) and their weights; all weights 0 outside [-1, h] x [-1, w].
struct Sample {
  int pix[4];
  float wt[4];
};

Sample bilinear(int h, int w, float y, float x) {
  Sample s{{0, 0, 0, 0}, {0.0f, 0.0f, 0.0f, 0.0f}};
  if (y < -1.0f || y > float(h) || x < -1.0f || x > float(w)) return s;
  y = std::max(y, 0.0f);
  x = std::max(x, 0.0f);
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
  const float ly = y - float(y_low), lx = x - float(x_low);
  const float hy = 1.0f - ly, hx = 1.0f - lx;
  s.pix[0] = y_low * w + x_low;
  s.pix[1] = y_low * w + x_high;
  s.pix[2] = y_high * w + x_low;
  s.pix[3] = y_high * w + x_high;
  s.wt[0] = hy * hx;
  s.wt[1] = hy * lx;
  s.wt[2] = ly * hx;
  s.wt[3] = ly * lx;
  return s;
}

// The sample (iy, ix) of bin (ph, pw).
inline Sample bin_sample(const RoiGeom& g, int h, int w, int ph, int pw, int iy, int ix) {
  const float y = g.start_h + float(ph) * g.bin_h + float(iy + 0.5f) * g.bin_h / float(g.grid_h);
  const float x = g.start_w + float(pw) * g.bin_w + float(ix + 0.5f) * g.bin_w / float(g.grid_w);
  return bilinear(h, w, y, x);
}

}  // namespace

void roi_align_forward(const float* x, int n, int h, int w, int c, const float* rois, int num_rois, int pooled_h,
                       int pooled_w, float spatial_scale, int sampling_ratio, bool aligned, float* y) {
  for (int r = 0; r < num_rois; ++r) {
    const RoiGeom g = roi_geom(rois + size_t(r) * 5, n, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
    const float* xb = g.b >= 0 ? x + size_t(g.b) * h * w * c : x;
    for (int ph = 0; ph < pooled_h; ++ph)
      for (int pw = 0; pw < pooled_w; ++pw) {
        float* __restrict out = y + ((size_t(r) * pooled_h + ph) * pooled_w + pw) * c;
        std::fill(out, out + c, 0.0f);
        if (g.b < 0 || h <= 0 || w <= 0) continue;
        for (int iy = 0; iy < g.grid_h; ++iy)
          for (int ix = 0; ix < g.grid_w; ++ix) {
            const Sample s = bin_sample(g, h, w, ph, pw, iy, ix);
            const float* __restrict v0 = xb + size_t(s.pix[0]) * c;
            const float* __restrict v1 = xb + size_t(s.pix[1]) * c;
            const float* __restrict v2 = xb + size_t(s.pix[2]) * c;
            const float* __restrict v3 = xb + size_t(s.pix[3]) * c;
            for (int ch = 0; ch < c; ++ch)
              out[ch] += s.wt[0] * v0[ch] + s.wt[1] * v1[ch] + s.wt[2] * v2[ch] + s.wt[3] * v3[ch];
          }
        for (int ch = 0; ch < c; ++ch) out[ch] /= g.count;
      }
  }
}

void roi_align_backward(const float* dy, int n, int h, int w, int c, const float* rois, int num_rois, int pooled_h,
                        int pooled_w, float spatial_scale, int sampling_ratio, bool aligned, float* dx) {
  if (h <= 0 || w <= 0) return;
  for (int r = 0; r < num_rois; ++r) {
    const RoiGeom g = roi_geom(rois + size_t(r) * 5, n, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
    if (g.b < 0) continue;
    float* dxb = dx + size_t(g.b) * h * w * c;
    for (int ph = 0; ph < pooled_h; ++ph)
      for (int pw = 0; pw < pooled_w; ++pw) {
        const float* __restrict gout = dy + ((size_t(r) * pooled_h + ph) * pooled_w + pw) * c;
        for (int iy = 0; iy < g.grid_h; ++iy)
          for (int ix = 0; ix < g.grid_w; ++ix) {
            const Sample s = bin_sample(g, h, w, ph, pw, iy, ix);
            for (int k = 0; k < 4; ++k) {
              if (s.wt[k] == 0.0f) continue;
              float* __restrict d = dxb + size_t(s.pix[k]) * c;
              const float wk = s.wt[k];
              for (int ch = 0; ch < c; ++ch) d[ch] += wk * gout[ch] / g.count;
            }
          }
      }
  }
}

// A mask row's target: the RoIAlign forward above on one channel of 0/1 values (the same samples,
// weights and sums, so the same bits), thresholded.
void rcnn_mask_targets(const float* rois, const int32_t* row_first, const int32_t* fg_first, const int32_t* labels,
                       const int32_t* matched, int n, int per_image, const uint8_t* gt_masks, const int32_t* gt_first,
                       int img_h, int img_w, int m, int max_rows, float* mask_rois, int32_t* mask_first,
                       int32_t* mask_labels, uint8_t* targets) {
  MLPD_CHECK(n >= 0 && per_image >= 0 && m > 0 && img_h > 0 && img_w > 0, "rcnn_mask_targets: bad sizes");
  MLPD_CHECK(int64_t(max_rows) >= int64_t(n) * per_image, "rcnn_mask_targets: max_rows below n * per_image");
  const size_t MM = size_t(m) * m, HW = size_t(img_h) * img_w;
  std::fill(mask_rois, mask_rois + size_t(max_rows) * 5, 0.0f);
  std::fill(mask_labels, mask_labels + max_rows, 0);
  std::fill(targets, targets + size_t(max_rows) * MM, uint8_t(0));
  mask_first[0] = 0;
  // An instance's mask made float once for all its rows (a float copy of every instance at once
  // would be tens of MB at COCO sizes).
  std::vector<float> mask(HW), pooled(MM);
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    const int r0 = row_first[i], f = std::min(fg_first[i + 1] - fg_first[i], per_image), o0 = mask_first[i];
    MLPD_CHECK(f >= 0 && f <= row_first[i + 1] - r0, "rcnn_mask_targets: inconsistent row bounds");
    order.resize(size_t(f));
    for (int r = 0; r < f; ++r) order[size_t(r)] = r;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return matched[r0 + a] < matched[r0 + b]; });
    int converted = -1;
    for (const int r : order) {
      const float* roi = rois + size_t(r0 + r) * 5;
      const int g = matched[r0 + r];
      MLPD_CHECK(g >= 0 && g < gt_first[i + 1] - gt_first[i],
                 "rcnn_mask_targets: a foreground row without its instance");
      std::copy(roi, roi + 5, mask_rois + size_t(o0 + r) * 5);
      mask_labels[o0 + r] = labels[r0 + r];
      if (g != converted) {
        const uint8_t* src = gt_masks + size_t(gt_first[i] + g) * HW;
        for (size_t p = 0; p < HW; ++p) mask[p] = src[p] ? 1.0f : 0.0f;
        converted = g;
      }
      const float box[5] = {0.0f, roi[1], roi[2], roi[3], roi[4]};
      roi_align_forward(mask.data(), 1, img_h, img_w, 1, box, 1, m, m, 1.0f, 0, false, pooled.data());
      uint8_t* t = targets + size_t(o0 + r) * MM;
      for (size_t q = 0; q < MM; ++q) t[q] = pooled[q] >= 0.5f ? 1 : 0;
    }
    mask_first[i + 1] = o0 + f;
  }
}

int fpn_roi_level(const float* roi, float canonical_size, int finest, int levels) {
  const double w = std::max(0.0f, roi[3] - roi[1]), h = std::max(0.0f, roi[4] - roi[2]);
  const double k = std::floor(4.0 + std::log2(std::sqrt(w * h) / double(canonical_size) + 1e-6)) - double(finest);
  return int(std::clamp(k, 0.0, double(levels - 1)));
}

// Each RoI alone through the one-level op on its level: a level's map receives its RoIs' gradients
// in row order, as it would from a call on that level's rows.
void roi_align_levels_forward(const RoiLevels& L, int n, int c, const float* rois, int num_rois, int pooled,
                              int sampling_ratio, float* y) {
  MLPD_CHECK(L.levels >= 1 && L.levels <= kMaxRoiLevels, "roi_align_levels: levels outside [1, 8]");
  const size_t row = size_t(pooled) * pooled * c;
  for (int r = 0; r < num_rois; ++r) {
    const float* roi = rois + size_t(r) * 5;
    const int l = fpn_roi_level(roi, L.canonical_size, L.finest, L.levels);
    roi_align_forward(L.x[l], n, L.h[l], L.w[l], c, roi, 1, pooled, pooled, L.spatial_scale[l], sampling_ratio, false,
                      y + size_t(r) * row);
  }
}

void roi_align_levels_backward(const RoiLevels& L, int n, int c, const float* rois, int num_rois, int pooled,
                               int sampling_ratio, const float* dy) {
  MLPD_CHECK(L.levels >= 1 && L.levels <= kMaxRoiLevels, "roi_align_levels: levels outside [1, 8]");
  const size_t row = size_t(pooled) * pooled * c;
  for (int r = 0; r < num_rois; ++r) {
    const float* roi = rois + size_t(r) * 5;
    const int l = fpn_roi_level(roi, L.canonical_size, L.finest, L.levels);
    roi_align_backward(dy + size_t(r) * row, n, L.h[l], L.w[l], c, roi, 1, pooled, pooled, L.spatial_scale[l],
                       sampling_ratio, false, L.dx[l]);
  }
}

}  // namespace mlpd
