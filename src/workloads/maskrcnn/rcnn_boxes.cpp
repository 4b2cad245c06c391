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
#include "core/rng.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

// Counter layout of the sampling: each key owns 2^20 counters, the first half for the positives
// (foreground), the second for the negatives (background), so the two draws never share a number.
constexpr uint64_t kKeyCounters = uint64_t(1) << 20;
constexpr uint64_t kNegativeCounters = uint64_t(1) << 19;
constexpr uint64_t kMaxKey = uint64_t(1) << 44;  // key * 2^20 must not wrap onto another key's counters

void check_sampling(int batch, float pos_fraction, uint64_t key) {
  MLPD_CHECK(batch >= 0 && uint64_t(batch) <= kNegativeCounters,
             "sampling batch " + std::to_string(batch) + " outside [0, 2^19]");
  MLPD_CHECK(pos_fraction >= 0.0f && pos_fraction <= 1.0f, "pos_fraction outside [0, 1]");
  MLPD_CHECK(key < kMaxKey, "sampling key must be below 2^44");
}

// Partial Fisher-Yates on candidates c (increasing index order): keeps k of them, uniformly, each
// draw i on counter first + i, so the result depends on (seed, stream, first) only.
void draw_without_replacement(std::vector<int32_t>& c, int k, uint64_t seed, uint64_t stream, uint64_t first) {
  const int n = static_cast<int>(c.size());
  k = std::min(k, n);
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(rng_below(seed, stream, first + uint64_t(i), uint64_t(n - i)));
    std::swap(c[size_t(i)], c[size_t(j)]);
  }
  c.resize(size_t(k));
}

// maskrcnn-benchmark's int(batch * positive_fraction), in double as Python computes it.
int max_positives(int batch, float pos_fraction) { return static_cast<int>(double(batch) * double(pos_fraction)); }

struct Match {
  float iou = 0.0f;
  int gt = -1;  // -1 when there is no ground truth
};

// The ground-truth box of highest IoU with `box`; ties go to the lower index (torch.max's choice).
Match best_match(const float* box, const float* gt_boxes, int num_gt) {
  Match m;
  for (int g = 0; g < num_gt; ++g) {
    const float v = box_iou(box, gt_boxes + size_t(g) * 4);
    if (m.gt < 0 || v > m.iou) m = {v, g};
  }
  return m;
}

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
  const double wa = double(ref[2]) - ref[0], ha = double(ref[3]) - ref[1];
  const double wb = double(target[2]) - target[0], hb = double(target[3]) - target[1];
  MLPD_CHECK(wa > 0 && ha > 0 && wb > 0 && hb > 0, "encode_box: box of non-positive size");
  const double cax = ref[0] + 0.5 * wa, cay = ref[1] + 0.5 * ha;
  const double cbx = target[0] + 0.5 * wb, cby = target[1] + 0.5 * hb;
  delta[0] = static_cast<float>(w.wx * (cbx - cax) / wa);
  delta[1] = static_cast<float>(w.wy * (cby - cay) / ha);
  delta[2] = static_cast<float>(w.ww * std::log(wb / wa));
  delta[3] = static_cast<float>(w.wh * std::log(hb / ha));
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
  draw_without_replacement(pos, max_positives(spec.batch, spec.pos_fraction), seed, stream, key * kKeyCounters);
  draw_without_replacement(neg, spec.batch - static_cast<int>(pos.size()), seed, stream,
                           key * kKeyCounters + kNegativeCounters);
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
  std::vector<float> cand(proposals.boxes);
  cand.insert(cand.end(), gt_boxes, gt_boxes + size_t(num_gt) * 4);
  const int n = proposals.count() + num_gt;
  std::vector<int32_t> fg, bg, match_of(size_t(n), -1);
  for (int i = 0; i < n; ++i) {
    const Match m = best_match(cand.data() + size_t(i) * 4, gt_boxes, num_gt);
    if (m.gt >= 0 && m.iou >= spec.fg_iou) {
      fg.push_back(i);
      match_of[size_t(i)] = m.gt;
    } else if (m.iou >= spec.bg_iou_lo && m.iou < spec.bg_iou_hi) {
      bg.push_back(i);
    }
  }
  draw_without_replacement(fg, max_positives(spec.batch, spec.pos_fraction), seed, stream, key * kKeyCounters);
  draw_without_replacement(bg, spec.batch - static_cast<int>(fg.size()), seed, stream,
                           key * kKeyCounters + kNegativeCounters);
  RoiSample s;
  s.foreground = static_cast<int>(fg.size());
  s.deltas.resize(fg.size() * 4);
  for (const int32_t i : fg) {
    const int g = match_of[size_t(i)];
    const float* roi = cand.data() + size_t(i) * 4;
    encode_box(roi, gt_boxes + size_t(g) * 4, kRoiBoxWeights, s.deltas.data() + s.labels.size() * 4);
    s.rois.insert(s.rois.end(), roi, roi + 4);
    s.labels.push_back(gt_labels[g]);
    s.matched.push_back(g);
  }
  for (const int32_t i : bg) {
    s.rois.insert(s.rois.end(), cand.begin() + size_t(i) * 4, cand.begin() + size_t(i) * 4 + 4);
    s.labels.push_back(0);
    s.matched.push_back(-1);
  }
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
  const int F = s.foreground;
  std::vector<float> out(size_t(F) * m * m, 0.0f);
  // One instance at a time, all its RoIs in one RoIAlign call: a float copy of every instance's mask
  // at once would be tens of MB at COCO sizes.
  std::vector<int32_t> by_instance(static_cast<size_t>(F));
  std::iota(by_instance.begin(), by_instance.end(), 0);
  std::stable_sort(by_instance.begin(), by_instance.end(),
                   [&](int32_t a, int32_t b) { return s.matched[size_t(a)] < s.matched[size_t(b)]; });
  std::vector<float> image(size_t(img_h) * img_w), rois, pooled;
  for (size_t first = 0; first < by_instance.size();) {
    const int g = s.matched[size_t(by_instance[first])];
    MLPD_CHECK(g >= 0 && size_t(g) < masks.size() && masks[size_t(g)] != nullptr,
               "mask_targets: a foreground RoI's instance has no mask");
    size_t last = first;
    while (last < by_instance.size() && s.matched[size_t(by_instance[last])] == g) ++last;
    const uint8_t* mask = masks[size_t(g)];
    for (size_t p = 0; p < image.size(); ++p) image[p] = mask[p] ? 1.0f : 0.0f;
    rois.clear();
    for (size_t r = first; r < last; ++r) {
      const float* roi = s.rois.data() + size_t(by_instance[r]) * 4;
      rois.insert(rois.end(), {0.0f, roi[0], roi[1], roi[2], roi[3]});
    }
    const int R = static_cast<int>(last - first);
    pooled.resize(size_t(R) * m * m);
    roi_align_forward(image.data(), 1, img_h, img_w, 1, rois.data(), R, m, m, 1.0f, 0, false, pooled.data());
    for (int r = 0; r < R; ++r) {
      float* o = out.data() + size_t(by_instance[first + size_t(r)]) * m * m;
      for (int q = 0; q < m * m; ++q) o[q] = pooled[size_t(r) * m * m + q] >= 0.5f ? 1.0f : 0.0f;
    }
    first = last;
  }
  return out;
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
