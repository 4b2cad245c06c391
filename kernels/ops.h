// The kernels' shared types and the CPU op declarations (kernels/cpu/<op>.cpp). The CUDA ops
// (kernels/cuda/<op>.cu, namespace mlpd::cuda) have the same signatures: both namespaces include
// kernels/op_signatures.inc, which documents every op. Kernels know nothing of layers, ranks or
// workloads: raw pointers in, raw pointers out, scratch from an Arena.
//
// Layouts (all row-major, fp32):
//   activations   NHWC  [n, h, w, c]                (c fastest)
//   conv weight   HWIO  [k, k, c_in, c_out]         (= a [k*k*c_in, c_out] GEMM operand)
//   linear weight       [in, out]                   (y = x * W + b)
//   batch norm          per-channel vectors [c]; an NHWC tensor is seen as [rows = n*h*w, c]
// Setting FTZ/DAZ (core/fpu.h) is the caller's job, as is openblas_set_num_threads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/arena.h"

namespace mlpd {

// 2-D convolution, square kernel, no bias (ResNet convs are followed by batch norm).
struct ConvDims {
  int n = 1, h = 1, w = 1, c_in = 1, c_out = 1;  // input [n, h, w, c_in]
  int k = 3, stride = 1, pad = 1;                // kernel k x k, zero padding `pad` on each side
  int out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int out_w() const { return (w + 2 * pad - k) / stride + 1; }
};

// Pooling window (NHWC, square window).
struct PoolDims {
  int n = 1, h = 1, w = 1, c = 1;
  int k = 2, stride = 2, pad = 0;
  int out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int out_w() const { return (w + 2 * pad - k) / stride + 1; }
};

// Scaled dot-product attention, multi-head (transformer). Query row i sits at key position
// i + (k_len - q_len), so a causal mask also serves incremental decoding against a key cache.
struct AttentionDims {
  int batch = 1, heads = 1, q_len = 1, k_len = 1, head_dim = 1;
  bool causal = false;  // mask keys after the query's own position
};

// Normalized Bahdanau (additive) attention (gnmt): one query per decoder step, all steps at once.
struct AdditiveAttentionDims {
  int batch = 1, q_len = 1, k_len = 1;
  int units = 1;      // width of the projected query and keys (and of bias and v)
  int value_dim = 1;  // width of the values (the encoder outputs)
};

// Mask R-CNN's RoI sampling (rcnn_sample_rois): the thresholds and sample sizes of the references'
// sampler, and the counter-based draws' (seed, stream); image i of a batch draws with key + i.
struct RoiSampling {
  int batch = 64;             // RoIs per image
  float pos_fraction = 0.25f; // at most int(batch * pos_fraction) of them foreground
  float fg_iou = 0.5f, bg_iou_hi = 0.5f, bg_iou_lo = 0.0f;
  uint64_t seed = 0, stream = 0, key = 0;
};

// An FPN's pooled levels for RoIAlign (roi_align_levels_*): level l is x[l] [n, h[l], w[l], c] at
// spatial_scale[l] (1 / its stride), dx[l] its gradient; finest is the pyramid level of x[0] (P2:
// 2). Each RoI pools from the level fpn_roi_level picks.
inline constexpr int kMaxRoiLevels = 8;
struct RoiLevels {
  int levels = 1;
  const float* x[kMaxRoiLevels] = {};
  float* dx[kMaxRoiLevels] = {};
  int h[kMaxRoiLevels] = {}, w[kMaxRoiLevels] = {};
  float spatial_scale[kMaxRoiLevels] = {};
  float canonical_size = 224.0f;  // an RoI of this side goes to pyramid level 4
  int finest = 2;
};

#include "kernels/op_signatures.inc"  // IWYU pragma: export

// IoU of two (x1, y1, x2, y2) boxes, 0 where the union is not positive: the one every detection op
// decides with (kernels/cpu/detection.cpp, without fused multiply-adds), for host code that must
// decide the same way (Mask R-CNN's matching before the NMS op).
float box_iou(const float* a, const float* b);
// The R-CNN box coder's decoding (both references'): box = (x1, y1, x2, y2) of reference box `ref`
// moved by delta / (wx, wy, ww, wh), the size deltas clamped at log(1000 / 16), in double rounded
// to float once; the one rpn_proposals decodes with, for host code that must decode the same way.
void rcnn_decode_box(const float* ref, const float* delta, float wx, float wy, float ww, float wh, float* box);
// Its encoding: delta = (wx (cbx - cax) / wa, wy (cby - cay) / ha, ww log(wb / wa), wh log(hb / ha))
// of target b against reference a (w = x2 - x1, h = y2 - y1, centres c), in double rounded to float
// once; both boxes of positive size (throws otherwise).
void rcnn_encode_box(const float* ref, const float* target, float wx, float wy, float ww, float wh, float* delta);
// maskrcnn-benchmark's LevelMapper: the pooled level (0 the finest) of an RoI [5] (image, x1, y1, x2,
// y2): floor(4 + log2(sqrt(w h) / canonical_size + 1e-6)) - finest, clamped to [0, levels), with w
// and h the float differences (at least 0) and the rest in double. The CUDA ops decide the same way.
int fpn_roi_level(const float* roi, float canonical_size, int finest, int levels);
// The samplers' partial Fisher-Yates over candidates c[0, n) (in increasing index order): for draw
// i < k' = min(k, n), j = i + rng_below(seed, stream, first + i, n - i), swap(c[i], c[j]); c[0, k')
// is the sample, in that order. Returns k'. A function of (seed, stream, first) only.
int draw_without_replacement(int32_t* c, int n, int k, uint64_t seed, uint64_t stream, uint64_t first);
// The counter layout of the samplers' draws: each key owns 2^20 counters, the first half for the
// positives (foreground), the second for the negatives (background); keys below 2^44, samples of at
// most 2^19.
inline constexpr uint64_t kSampleKeyCounters = uint64_t(1) << 20;
inline constexpr uint64_t kSampleNegativeCounters = uint64_t(1) << 19;
inline constexpr uint64_t kSampleMaxKey = uint64_t(1) << 44;
// maskrcnn-benchmark's int(batch * positive_fraction), in double as Python computes it.
inline int sample_max_positives(int batch, float pos_fraction) {
  return static_cast<int>(double(batch) * double(pos_fraction));
}

}  // namespace mlpd
