// The host-side box logic of Mask R-CNN; the contract of every function is in rcnn_boxes.h.
//
// No fused multiply-adds here (as in kernels/cpu/detection.cpp, whose box_iou this file uses, so a
// box matched here at IoU t is suppressed by the NMS op at exactly the same t, and a ground-truth
// box appended to the RoIs has IoU exactly 1 with itself): the box coder's arithmetic stays as
// written.
#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma clang fp contract(off)
#endif

#include "workloads/maskrcnn/rcnn_boxes.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

void check_sampling(int batch, float pos_fraction, uint64_t key) {
  MLPD_CHECK(batch >= 0 && uint64_t(batch) <= kSampleNegativeCounters,
             "sampling batch " + std::to_string(batch) + " outside [0, 2^19]");
  MLPD_CHECK(pos_fraction >= 0.0f && pos_fraction <= 1.0f, "pos_fraction outside [0, 1]");
  MLPD_CHECK(key < kSampleMaxKey, "sampling key must be below 2^44");
}

// The partial Fisher-Yates of kernels/ops.h on a list, cut to the sample.
void draw_without_replacement(std::vector<int32_t>& c, int k, uint64_t seed, uint64_t stream, uint64_t first) {
  c.resize(size_t(::mlpd::draw_without_replacement(c.data(), static_cast<int>(c.size()), k, seed, stream, first)));
}

struct Match {
  float iou = 0.0f;
  int gt = -1;  // -1 when there is no ground truth
};

// Greedy NMS of boxes [n, 4] sorted by descending score, with the CPU kernel (the device's op takes
// device pointers, and these few hundred boxes are on the host): the kept positions, in order.
std::vector<int32_t> nms_host(const float* boxes, int n, float iou_threshold, int max_keep) {
  std::vector<int32_t> keep(size_t(std::max(std::min(n, max_keep), 0)));
  if (keep.empty()) return keep;
  Arena arena;
  arena_init(arena, nms_scratch_floats(n) * sizeof(float));
  keep.resize(size_t(nms_sorted(boxes, n, iou_threshold, max_keep, keep.data(), arena)));
  return keep;
}

// Bilinear sample of a [m, m] grid at (gy, gx), coordinates clamped to the grid's centres.
float grid_sample(const float* grid, int m, double gy, double gx) {
  gy = std::clamp(gy, 0.0, double(m - 1));
  gx = std::clamp(gx, 0.0, double(m - 1));
  const int y0 = static_cast<int>(gy), x0 = static_cast<int>(gx);
  const int y1 = std::min(y0 + 1, m - 1), x1 = std::min(x0 + 1, m - 1);
  const double ly = gy - y0, lx = gx - x0;
  const double top = (1 - lx) * grid[y0 * m + x0] + lx * grid[y0 * m + x1];
  const double bottom = (1 - lx) * grid[y1 * m + x0] + lx * grid[y1 * m + x1];
  return static_cast<float>((1 - ly) * top + ly * bottom);
}

// The pixels [lo, hi) of one axis whose centre p + 0.5 lies in [a, b), within [0, size).
void centre_range(float a, float b, int size, int& lo, int& hi) {
  lo = std::clamp(static_cast<int>(std::floor(double(a) - 0.5)), 0, size);
  hi = std::clamp(static_cast<int>(std::ceil(double(b) - 0.5)) + 1, 0, size);
  while (lo < hi && !(double(lo) + 0.5 >= double(a))) ++lo;  // floor/ceil only bracket: settle exactly
  while (hi > lo && !(double(hi - 1) + 0.5 < double(b))) --hi;
}

}  // namespace

// =============================== anchors and the box coder ===============================

void append_rois(std::vector<float>& rois, int image, const float* boxes, int count) {
  for (int r = 0; r < count; ++r) {
    rois.push_back(float(image));
    rois.insert(rois.end(), boxes + size_t(r) * 4, boxes + size_t(r) * 4 + 4);
  }
}

std::vector<float> make_anchors(const AnchorSpec& spec, int feat_h, int feat_w) {
  MLPD_CHECK(feat_h >= 0 && feat_w >= 0, "make_anchors: negative feature map size");
  MLPD_CHECK(spec.stride > 0 && !spec.sizes.empty() && !spec.ratios.empty(), "make_anchors: empty anchor spec");
  const int A = spec.per_cell(), S = static_cast<int>(spec.sizes.size());
  std::vector<double> half_w(static_cast<size_t>(A)), half_h(static_cast<size_t>(A));
  for (int a = 0; a < A; ++a) {
    const double r = spec.ratios[size_t(a / S)], s = spec.sizes[size_t(a % S)];
    MLPD_CHECK(r > 0 && s > 0, "make_anchors: sizes and ratios must be positive");
    half_w[size_t(a)] = 0.5 * s / std::sqrt(r);
    half_h[size_t(a)] = 0.5 * s * std::sqrt(r);
  }
  std::vector<float> out(size_t(feat_h) * feat_w * A * 4);
  float* p = out.data();
  for (int y = 0; y < feat_h; ++y)
    for (int x = 0; x < feat_w; ++x) {
      const double cx = (x + 0.5) * spec.stride, cy = (y + 0.5) * spec.stride;
      for (int a = 0; a < A; ++a, p += 4) {
        p[0] = static_cast<float>(cx - half_w[size_t(a)]);
        p[1] = static_cast<float>(cy - half_h[size_t(a)]);
        p[2] = static_cast<float>(cx + half_w[size_t(a)]);
        p[3] = static_cast<float>(cy + half_h[size_t(a)]);
      }
    }
  return out;
}

void encode_box(const float* ref, const float* target, const BoxWeights& w, float* delta) {
  rcnn_encode_box(ref, target, w.wx, w.wy, w.ww, w.wh, delta);
}

void decode_box(const float* ref, const float* delta, const BoxWeights& w, float* box) {
  rcnn_decode_box(ref, delta, w.wx, w.wy, w.ww, w.wh, box);
}

// The same operations in the same order as the NMS kernel's (kernels/cpu/detection.cpp).
void clip_box(float* box, int img_h, int img_w) {
  box[0] = std::clamp(box[0], 0.0f, float(img_w));
  box[1] = std::clamp(box[1], 0.0f, float(img_h));
  box[2] = std::clamp(box[2], 0.0f, float(img_w));
  box[3] = std::clamp(box[3], 0.0f, float(img_h));
}

// =============================== RPN ===============================

RpnSample sample_rpn_targets(const RpnTargetSpec& spec, const float* anchors, int num_anchors, const float* gt_boxes,
                             int num_gt, int img_h, int img_w, uint64_t seed, uint64_t stream, uint64_t key) {
  MLPD_CHECK(num_anchors >= 0 && num_gt >= 0, "sample_rpn_targets: negative count");
  check_sampling(spec.batch, spec.pos_fraction, key);
  const auto visible = [&](const float* a) {
    const float t = spec.straddle;
    return t < 0 || (a[0] >= -t && a[1] >= -t && a[2] <= float(img_w) + t && a[3] <= float(img_h) + t);
  };
  // Each box's best IoU over the visible anchors: the anchors reaching it are positive whatever pos_iou.
  // Two passes over the IoUs rather than an [anchors, gt] matrix: ~10^5 anchors x tens of boxes.
  std::vector<float> gt_best(size_t(num_gt), 0.0f);
  for (int i = 0; i < num_anchors; ++i) {
    const float* a = anchors + size_t(i) * 4;
    if (!visible(a)) continue;
    for (int g = 0; g < num_gt; ++g)
      gt_best[size_t(g)] = std::max(gt_best[size_t(g)], box_iou(a, gt_boxes + size_t(g) * 4));
  }
  std::vector<int32_t> pos, neg, pos_gt(size_t(num_anchors), -1);
  for (int i = 0; i < num_anchors; ++i) {
    const float* a = anchors + size_t(i) * 4;
    if (!visible(a)) continue;
    Match m;
    bool best_of_some_box = false;
    for (int g = 0; g < num_gt; ++g) {
      const float v = box_iou(a, gt_boxes + size_t(g) * 4);
      if (m.gt < 0 || v > m.iou) m = {v, g};
      best_of_some_box = best_of_some_box || (gt_best[size_t(g)] > 0.0f && v == gt_best[size_t(g)]);
    }
    if (m.gt >= 0 && (m.iou >= spec.pos_iou || best_of_some_box)) {
      pos.push_back(i);
      pos_gt[size_t(i)] = m.gt;
    } else if (m.iou < spec.neg_iou) {
      neg.push_back(i);
    }
  }
  draw_without_replacement(pos, sample_max_positives(spec.batch, spec.pos_fraction), seed, stream,
                           key * kSampleKeyCounters);
  draw_without_replacement(neg, spec.batch - static_cast<int>(pos.size()), seed, stream,
                           key * kSampleKeyCounters + kSampleNegativeCounters);
  RpnSample s;
  s.positives = static_cast<int>(pos.size());
  s.index = pos;
  s.index.insert(s.index.end(), neg.begin(), neg.end());
  s.deltas.resize(pos.size() * 4);
  for (size_t p = 0; p < pos.size(); ++p)
    encode_box(anchors + size_t(pos[p]) * 4, gt_boxes + size_t(pos_gt[size_t(pos[p])]) * 4, kRpnBoxWeights,
               s.deltas.data() + p * 4);
  return s;
}

double rpn_loss(const RpnSample& s, const float* objectness, const float* deltas, int num_anchors, float grad_scale,
                float* dobjectness, float* ddeltas, double* cls, double* box) {
  const int n = static_cast<int>(s.index.size());
  MLPD_CHECK(s.positives >= 0 && s.positives <= n && s.deltas.size() == size_t(s.positives) * 4,
             "rpn_loss: inconsistent RpnSample");
  const int32_t sample_first[2] = {0, n}, positive_first[2] = {0, s.positives};
  Arena none;
  double parts[2] = {0.0, 0.0};
  rpn_loss_batch(objectness, deltas, 1, num_anchors, s.index.data(), sample_first, positive_first, s.deltas.data(),
                 grad_scale, dobjectness, ddeltas, parts, none);
  if (cls) *cls = parts[0];
  if (box) *box = parts[1];
  return parts[0] + parts[1];
}

Proposals make_proposals(const ProposalSpec& spec, const float* anchors, const float* objectness,
                         const float* deltas, int num_anchors, int img_h, int img_w) {
  MLPD_CHECK(num_anchors >= 0, "make_proposals: negative anchor count");
  return make_level_proposals(spec, anchors, objectness, deltas, {0, num_anchors}, img_h, img_w);
}

Proposals make_level_proposals(const ProposalSpec& spec, const float* anchors, const float* objectness,
                               const float* deltas, const std::vector<int>& level_first, int img_h, int img_w) {
  MLPD_CHECK(level_first.size() >= 2 && level_first.front() == 0, "make_level_proposals: bad level bounds");
  const int levels = static_cast<int>(level_first.size()) - 1, A = level_first.back();
  const std::vector<int32_t> first(level_first.begin(), level_first.end());
  const int post = std::max(spec.post_nms_topk, 0);
  Arena arena;
  arena_init(arena, rpn_proposals_scratch_floats(1, A, levels, spec.pre_nms_topk, post) * sizeof(float));
  std::vector<float> boxes(static_cast<size_t>(post) * 4), scores(static_cast<size_t>(post));
  int32_t count = 0;
  rpn_proposals(objectness, deltas, anchors, 1, A, first.data(), levels, img_h, img_w, spec.pre_nms_topk, post,
                spec.nms_iou, spec.min_size, boxes.data(), scores.data(), &count, arena);
  Proposals p;
  p.boxes.assign(boxes.begin(), boxes.begin() + size_t(count) * 4);
  p.scores.assign(scores.begin(), scores.begin() + count);
  return p;
}

// =============================== the heads' RoIs and targets ===============================

RoiSample sample_rois(const RoiSampleSpec& spec, const Proposals& proposals, const float* gt_boxes,
                      const int32_t* gt_labels, int num_gt, uint64_t seed, uint64_t stream, uint64_t key) {
  MLPD_CHECK(num_gt >= 0 && proposals.boxes.size() == size_t(proposals.count()) * 4, "sample_rois: bad input");
  check_sampling(spec.batch, spec.pos_fraction, key);
  for (int g = 0; g < num_gt; ++g) MLPD_CHECK(gt_labels[g] >= 1, "sample_rois: a ground-truth label is not >= 1");
  // The CPU op on one image.
  const RoiSampling rs{spec.batch, spec.pos_fraction, spec.fg_iou, spec.bg_iou_hi, spec.bg_iou_lo, seed, stream, key};
  const int P = proposals.count(), R = std::max(spec.batch, 0);
  const int32_t count = P, gt_first[2] = {0, num_gt};
  std::vector<float> rois(size_t(R) * 5), deltas(size_t(R) * 4);
  std::vector<int32_t> labels(static_cast<size_t>(R)), matched(static_cast<size_t>(R));
  int32_t row_first[2], fg_first[2];
  Arena none;
  rcnn_sample_rois(rs, proposals.boxes.data(), &count, P, gt_boxes, gt_labels, gt_first, 1, num_gt, R, rois.data(),
                   row_first, fg_first, labels.data(), matched.data(), deltas.data(), none);
  RoiSample s;
  const int k = row_first[1];
  s.foreground = fg_first[1];
  for (int r = 0; r < k; ++r) s.rois.insert(s.rois.end(), rois.begin() + r * 5 + 1, rois.begin() + r * 5 + 5);
  s.labels.assign(labels.begin(), labels.begin() + k);
  s.matched.assign(matched.begin(), matched.begin() + k);
  s.deltas.assign(deltas.begin(), deltas.begin() + size_t(s.foreground) * 4);
  return s;
}

double roi_box_loss(const RoiSample& s, const float* box_deltas, int classes, float grad_scale,
                    float* dbox_deltas) {
  MLPD_CHECK(s.foreground >= 0 && s.foreground <= s.count() && s.deltas.size() == size_t(s.foreground) * 4,
             "roi_box_loss: inconsistent RoiSample");
  const int32_t row_first[2] = {0, s.count()}, fg_first[2] = {0, s.foreground};
  Arena none;
  double parts[2] = {0.0, 0.0};
  rcnn_box_loss(nullptr, box_deltas, 1, classes, s.labels.data(), row_first, fg_first, s.deltas.data(), grad_scale,
                nullptr, dbox_deltas, parts, none);
  return parts[0] + parts[1];
}

std::vector<float> mask_targets(const RoiSample& s, const std::vector<const uint8_t*>& masks, int img_h, int img_w,
                                int m) {
  MLPD_CHECK(m > 0 && img_h > 0 && img_w > 0, "mask_targets: empty grid or image");
  const int F = s.foreground, G = static_cast<int>(masks.size());
  MLPD_CHECK(F >= 0 && F <= s.count() && s.rois.size() == size_t(s.count()) * 4,
             "mask_targets: inconsistent RoiSample");
  for (int r = 0; r < F; ++r) {
    const int g = s.matched[size_t(r)];
    MLPD_CHECK(g >= 0 && g < G && masks[size_t(g)] != nullptr, "mask_targets: a foreground RoI's instance has no mask");
  }
  // The CPU op on one image: the masks side by side, the RoIs as rows.
  const size_t HW = size_t(img_h) * img_w, MM = size_t(m) * m;
  std::vector<uint8_t> dense(size_t(G) * HW, 0);
  for (int g = 0; g < G; ++g)
    if (masks[size_t(g)]) std::copy(masks[size_t(g)], masks[size_t(g)] + HW, dense.begin() + ptrdiff_t(size_t(g) * HW));
  std::vector<float> rois;
  append_rois(rois, 0, s.rois.data(), F);
  const int32_t row_first[2] = {0, F}, fg_first[2] = {0, F}, gt_first[2] = {0, G};
  std::vector<float> mask_rois(size_t(F) * 5);
  std::vector<int32_t> mask_labels(static_cast<size_t>(F));
  std::vector<uint8_t> targets(size_t(F) * MM);
  int32_t mask_first[2];
  rcnn_mask_targets(rois.data(), row_first, fg_first, s.labels.data(), s.matched.data(), 1, F, dense.data(), gt_first,
                    img_h, img_w, m, F, mask_rois.data(), mask_first, mask_labels.data(), targets.data());
  return std::vector<float>(targets.begin(), targets.end());
}

// =============================== inference ===============================

Detections detect_boxes(const DetectSpec& spec, const float* rois, const float* cls_logits, const float* box_deltas,
                        int count, int classes, int img_h, int img_w) {
  MLPD_CHECK(count >= 0 && classes >= 1, "detect_boxes: bad sizes");
  std::vector<float> prob(size_t(count) * classes);
  for (int i = 0; i < count; ++i) {
    const float* z = cls_logits + size_t(i) * classes;
    const double mx = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - mx);
    for (int c = 0; c < classes; ++c)
      prob[size_t(i) * classes + c] = static_cast<float>(std::exp(double(z[c]) - mx) / sum);
  }
  struct Det {
    float score;
    int cls, roi;
    float box[4];
  };
  std::vector<Det> kept, cand;
  std::vector<float> cand_boxes;
  for (int c = 1; c < classes; ++c) {
    cand.clear();
    for (int i = 0; i < count; ++i) {
      const float p = prob[size_t(i) * classes + c];
      if (!(p > spec.score_threshold)) continue;
      Det d{p, c, i, {}};
      decode_box(rois + size_t(i) * 4, box_deltas + (size_t(i) * classes + c) * 4, kRoiBoxWeights, d.box);
      clip_box(d.box, img_h, img_w);
      cand.push_back(d);
    }
    std::sort(cand.begin(), cand.end(),
              [](const Det& a, const Det& b) { return a.score > b.score || (a.score == b.score && a.roi < b.roi); });
    cand_boxes.clear();
    for (const Det& d : cand) cand_boxes.insert(cand_boxes.end(), d.box, d.box + 4);
    const int n = static_cast<int>(cand.size());
    for (const int32_t j : nms_host(cand_boxes.data(), n, spec.nms_iou, n)) kept.push_back(cand[size_t(j)]);
  }
  const size_t take = std::min(kept.size(), size_t(std::max(spec.max_dets, 0)));
  std::partial_sort(kept.begin(), kept.begin() + take, kept.end(), [](const Det& a, const Det& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.cls != b.cls) return a.cls < b.cls;
    return a.roi < b.roi;
  });
  Detections out;
  for (size_t r = 0; r < take; ++r) {
    out.boxes.insert(out.boxes.end(), kept[r].box, kept[r].box + 4);
    out.scores.push_back(kept[r].score);
    out.labels.push_back(kept[r].cls);
  }
  return out;
}

void paste_mask(const float* grid, int m, const float* box, int img_h, int img_w, float threshold, uint8_t* out) {
  MLPD_CHECK(m > 0 && img_h >= 0 && img_w >= 0, "paste_mask: bad sizes");
  std::fill(out, out + size_t(img_h) * img_w, uint8_t(0));
  const double bw = double(box[2]) - box[0], bh = double(box[3]) - box[1];
  if (!(bw > 0 && bh > 0)) return;
  int x_lo, x_hi, y_lo, y_hi;
  centre_range(box[0], box[2], img_w, x_lo, x_hi);
  centre_range(box[1], box[3], img_h, y_lo, y_hi);
  for (int y = y_lo; y < y_hi; ++y) {
    const double gy = (y + 0.5 - box[1]) / bh * m - 0.5;
    for (int x = x_lo; x < x_hi; ++x) {
      const double gx = (x + 0.5 - box[0]) / bw * m - 0.5;
      out[size_t(y) * img_w + x] = grid_sample(grid, m, gy, gx) >= threshold ? 1 : 0;
    }
  }
}

}  // namespace mlpd
