// The host-side box logic of Mask R-CNN (MLPerf's reference: maskrcnn-benchmark; torchvision's
// detection models as the second reading): anchors, the box coder, the RPN's anchor targets and its
// proposals, the sampling of RoIs for the box and mask heads, the mask targets, and the
// post-processing of the box head into detections with pasted masks. Everything works on one image
// at a time, in pixels, boxes as (x1, y1, x2, y2) floats, widths x2 - x1 (torchvision's convention;
// maskrcnn-benchmark's legacy "+1" is not kept). The RPN's anchor sampling (from the anchors and the
// ground truth alone) runs here, on the host, and only its output travels to the device; what reads
// the networks' outputs is a device op (rpn_proposals, rpn_loss_batch, rcnn_sample_rois,
// rcnn_mask_targets, rcnn_box_loss, rcnn_mask_loss in kernels/op_signatures.inc), and rpn_loss,
// make_proposals, make_level_proposals, sample_rois, mask_targets and roi_box_loss below run their
// CPU kernels on one image.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace mlpd {

// ---- Anchors: per feature-map cell, one box per (ratio, size) pair, ratio-major (a = r * sizes +
// s), centred at the cell's centre ((x + 0.5) * stride, (y + 0.5) * stride); a box of `size` and
// ratio r = h / w has w = size / sqrt(r), h = size * sqrt(r). Output [feat_h * feat_w * A, 4] in
// the order (y, x, a): the order of an NHWC head's [n, h, w, A] outputs.
struct AnchorSpec {
  int stride = 8;
  std::vector<float> sizes{16, 32, 64};
  std::vector<float> ratios{0.5f, 1.0f, 2.0f};
  int per_cell() const { return static_cast<int>(sizes.size() * ratios.size()); }
};
std::vector<float> make_anchors(const AnchorSpec& spec, int feat_h, int feat_w);

// ---- Box coder (R-CNN's): with w = x2 - x1, h = y2 - y1, centre (cx, cy) of reference box a and
// target b: d = (wx (cbx - cax) / wa, wy (cby - cay) / ha, ww log(wb / wa), wh log(hb / ha)).
// Decoding clamps the size deltas at log(1000 / 16) as both references do.
struct BoxWeights {
  float wx = 1, wy = 1, ww = 1, wh = 1;
};
inline constexpr BoxWeights kRpnBoxWeights{1, 1, 1, 1};
inline constexpr BoxWeights kRoiBoxWeights{10, 10, 5, 5};
void encode_box(const float* ref, const float* target, const BoxWeights& w, float* delta);
void decode_box(const float* ref, const float* delta, const BoxWeights& w, float* box);
// Intersection over union: box_iou of kernels/ops.h, the one the NMS and SSD ops use.
// Clips to [0, img_w] x [0, img_h].
void clip_box(float* box, int img_h, int img_w);

// Appends `count` boxes [count, 4] to rois as RoI rows [5] (image index in the batch, x1, y1, x2, y2).
void append_rois(std::vector<float>& rois, int image, const float* boxes, int count);

// ---- RPN anchor targets for one image. Anchors reaching more than `straddle` pixels outside the
// image are ignored (< 0: none ignored). Each remaining anchor: positive if its best IoU with a
// ground-truth box >= pos_iou, or if it is (one of) the best remaining anchor(s) of some box (IoU
// equal to that box's best over the remaining anchors, best > 0); negative if its best IoU <
// neg_iou and not positive; otherwise ignored. A positive's matched box is the one of highest IoU
// (ties: lower index). Then at most int(batch * pos_fraction) positives and batch - positives
// negatives are drawn uniformly without replacement by a partial Fisher-Yates over the candidates
// c[0..n) in increasing index order: for draw i < k, j = i + rng_below(seed, stream, counter,
// n - i), swap(c[i], c[j]); c[0..k) is the sample, in that order. The positives' draws use counters
// key * 2^20 + i, the negatives' key * 2^20 + 2^19 + i (key < 2^44, batch <= 2^19), so the sample is
// a function of (seed, stream, key) only.
struct RpnTargetSpec {
  float pos_iou = 0.7f, neg_iou = 0.3f;
  int batch = 256;
  float pos_fraction = 0.5f;
  float straddle = 0.0f;
};
struct RpnSample {
  std::vector<int32_t> index;   // sampled anchors: the positives first, then the negatives
  int positives = 0;
  std::vector<float> deltas;    // [positives, 4]: encode_box(anchor, matched gt, kRpnBoxWeights)
};
RpnSample sample_rpn_targets(const RpnTargetSpec& spec, const float* anchors, int num_anchors, const float* gt_boxes,
                             int num_gt, int img_h, int img_w, uint64_t seed, uint64_t stream, uint64_t key);

// The RPN loss of one image (maskrcnn-benchmark's): binary cross-entropy with logits over the
// sampled anchors (label 1 for the positives, 0 for the negatives), divided by the sample count,
// plus smooth-L1 (beta = 1/9, summed over the 4 deltas) over the positives, divided by the same
// count. objectness [num_anchors], deltas [num_anchors, 4]; gradients scaled by grad_scale and
// WRITTEN into dobjectness and ddeltas at the sampled anchors, zero elsewhere (both overwritten
// whole). Returns the unscaled loss (objectness part + box part); the parts go to *cls, *box
// (nullable).
double rpn_loss(const RpnSample& s, const float* objectness, const float* deltas, int num_anchors, float grad_scale,
                float* dobjectness, float* ddeltas, double* cls = nullptr, double* box = nullptr);

// ---- Proposals of one image: the pre_nms_topk anchors of highest objectness (ties: lower index
// first), decoded (kRpnBoxWeights) and clipped, boxes narrower or lower than min_size dropped,
// greedy NMS at nms_iou (IoU > nms_iou suppresses), at most post_nms_topk kept, by descending score.
struct ProposalSpec {
  int pre_nms_topk = 600, post_nms_topk = 100;
  float nms_iou = 0.7f;
  float min_size = 0.0f;
};
struct Proposals {
  std::vector<float> boxes;   // [count, 4]
  std::vector<float> scores;  // [count]: objectness logits
  int count() const { return static_cast<int>(scores.size()); }
};
Proposals make_proposals(const ProposalSpec& spec, const float* anchors, const float* objectness,
                         const float* deltas, int num_anchors, int img_h, int img_w);
// The same over anchors in levels (an FPN's; level l holds anchors level_first[l] ..
// level_first[l + 1] - 1): each level's proposals as above (pre_nms_topk and post_nms_topk per
// level, NMS within the level), then the post_nms_topk of highest objectness over all levels (ties:
// the lower level first, then the level's order), as maskrcnn-benchmark's FPN post-processing
// does per image. One level: make_proposals.
Proposals make_level_proposals(const ProposalSpec& spec, const float* anchors, const float* objectness,
                               const float* deltas, const std::vector<int>& level_first, int img_h, int img_w);

// ---- RoIs for the heads, one training image: the proposals with the ground-truth boxes appended
// (as both references do), each matched to its best ground-truth box; foreground if IoU >= fg_iou,
// background if bg_iou_lo <= IoU < bg_iou_hi, else unused (ties between boxes: lower index). At
// most int(batch * pos_fraction) foreground and batch - foreground background RoIs, drawn as in
// sample_rpn_targets (same counters: give the two a different stream, or they draw the same numbers).
struct RoiSampleSpec {
  int batch = 64;
  float pos_fraction = 0.25f;
  float fg_iou = 0.5f, bg_iou_hi = 0.5f, bg_iou_lo = 0.0f;
};
struct RoiSample {
  std::vector<float> rois;        // [count, 4]: the foreground first, then the background
  std::vector<int32_t> labels;    // [count]: the matched box's class for foreground, 0 for background
  std::vector<int32_t> matched;   // [count]: index of the matched gt box (foreground), -1 (background)
  std::vector<float> deltas;      // [foreground, 4]: encode_box(roi, matched gt, kRoiBoxWeights)
  int foreground = 0;
  int count() const { return static_cast<int>(labels.size()); }
};
RoiSample sample_rois(const RoiSampleSpec& spec, const Proposals& proposals, const float* gt_boxes,
                      const int32_t* gt_labels, int num_gt, uint64_t seed, uint64_t stream, uint64_t key);

// Smooth-L1 (beta 1, summed over the 4 deltas) of the foreground RoIs' class-specific deltas
// (box_deltas [count, classes * 4], class k at columns 4k..4k+3) against s.deltas, divided by
// s.count() (maskrcnn-benchmark's box loss). dbox_deltas [count, classes * 4] OVERWRITTEN: zero but
// at the foreground rows' label columns, scaled by grad_scale. Returns the unscaled loss.
double roi_box_loss(const RoiSample& s, const float* box_deltas, int classes, float grad_scale,
                    float* dbox_deltas);

// ---- Mask targets: for foreground RoI i, the matched instance's mask (dense [img_h, img_w], 0/1,
// masks[matched[i]] in `masks`) sampled onto an m x m grid over the RoI with RoIAlign (the CPU op,
// sampling ratio 0, aligned false: torchvision's project_masks_on_boxes) and thresholded at 0.5.
// Output [foreground, m, m] of 0/1 floats.
std::vector<float> mask_targets(const RoiSample& s, const std::vector<const uint8_t*>& masks, int img_h, int img_w,
                                int m);

// ---- Detections of one image from the box head: softmax over cls_logits [count, classes]; for
// each class k >= 1 the RoI's class-k deltas decoded (kRoiBoxWeights) and clipped; scores >
// score_threshold kept; per-class greedy NMS at nms_iou; the max_dets highest scores over all
// classes (ties: lower class, then lower RoI index first).
struct DetectSpec {
  float score_threshold = 0.05f, nms_iou = 0.5f;
  int max_dets = 100;
};
struct Detections {
  std::vector<float> boxes;      // [count, 4], pixels
  std::vector<float> scores;
  std::vector<int32_t> labels;   // 1..classes-1
  int count() const { return static_cast<int>(scores.size()); }
};
Detections detect_boxes(const DetectSpec& spec, const float* rois, const float* cls_logits, const float* box_deltas,
                        int count, int classes, int img_h, int img_w);

// ---- A mask probability grid [m, m] pasted into the image: each pixel (x, y) whose centre lies in
// `box` (x1 <= x + 0.5 < x2, y1 <= y + 0.5 < y2: half-open, so abutting boxes share no pixel) takes
// the bilinear sample (edges clamped) of the grid at ((x + 0.5 - x1) / bw * m - 0.5,
// (y + 0.5 - y1) / bh * m - 0.5), and is 1 where that is >= threshold. out [img_h, img_w]
// overwritten (0 outside the box).
void paste_mask(const float* grid, int m, const float* box, int img_h, int img_w, float threshold, uint8_t* out);

}  // namespace mlpd
