// The detection ops (ssd, maskrcnn) on the CPU: SSD target assignment, the fused multibox loss,
// SSD post-processing (decode, softmax, per-class top-k and NMS, top detections), greedy NMS of
// sorted boxes, and Mask R-CNN's RPN proposals and loss and its heads' losses. RoIAlign is in
// roi_align.cpp.
//
// Every decision (a match, a mined negative, a candidate's rank, a suppression) is taken on values
// that the CUDA ops (kernels/cuda/detection.cu) compute bit for bit the same way:
//   - IoU in float, each operation rounded on its own (no fused multiply-add: GCC would contract
//     area_a + w*h into one, and nvcc too, so both files forbid it: here the pragma below, there
//     the __f*_rn intrinsics), in one fixed order (box_iou);
//   - log-sum-exp, softmax and the box decoding in double, rounded to float once, so that the last
//     bit of exp (glibc's and CUDA's may differ by an ulp in double) cannot show;
//   - rankings by a total order: value, then index (std::sort / partial_sort with that comparator
//     here, a radix select and a bitonic sort on (value, index) keys there).
// Loops run in a fixed order, so the results are the same bits on every run.
#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma clang fp contract(off)
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace mlpd {

// Declared in kernels/ops.h; the CUDA ops repeat it. Defined here, under this file's no-contraction
// pragma, so that every caller gets the same bits.
float box_iou(const float* a, const float* b) {
  const float iw = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float ih = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = iw * ih;
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  const float uni = area_a + area_b - inter;
  return uni > 0.0f ? inter / uni : 0.0f;
}

// Both references' bbox_xform_clip: a size delta above it would make exp() overflow a float box.
const double kSizeDeltaClip = std::log(1000.0 / 16.0);

void rcnn_decode_box(const float* ref, const float* delta, float wx, float wy, float ww, float wh, float* box) {
  const double wa = double(ref[2]) - ref[0], ha = double(ref[3]) - ref[1];
  const double cax = ref[0] + 0.5 * wa, cay = ref[1] + 0.5 * ha;
  const double dx = delta[0] / double(wx), dy = delta[1] / double(wy);
  const double dw = std::min(delta[2] / double(ww), kSizeDeltaClip);
  const double dh = std::min(delta[3] / double(wh), kSizeDeltaClip);
  const double cx = cax + dx * wa, cy = cay + dy * ha;
  const double bw = std::exp(dw) * wa, bh = std::exp(dh) * ha;
  box[0] = static_cast<float>(cx - 0.5 * bw);
  box[1] = static_cast<float>(cy - 0.5 * bh);
  box[2] = static_cast<float>(cx + 0.5 * bw);
  box[3] = static_cast<float>(cy + 0.5 * bh);
}

void rcnn_encode_box(const float* ref, const float* target, float wx, float wy, float ww, float wh, float* delta) {
  const double wa = double(ref[2]) - ref[0], ha = double(ref[3]) - ref[1];
  const double wb = double(target[2]) - target[0], hb = double(target[3]) - target[1];
  MLPD_CHECK(wa > 0 && ha > 0 && wb > 0 && hb > 0, "rcnn_encode_box: box of non-positive size");
  const double cax = ref[0] + 0.5 * wa, cay = ref[1] + 0.5 * ha;
  const double cbx = target[0] + 0.5 * wb, cby = target[1] + 0.5 * hb;
  delta[0] = static_cast<float>(wx * (cbx - cax) / wa);
  delta[1] = static_cast<float>(wy * (cby - cay) / ha);
  delta[2] = static_cast<float>(ww * std::log(wb / wa));
  delta[3] = static_cast<float>(wh * std::log(hb / ha));
}

int draw_without_replacement(int32_t* c, int n, int k, uint64_t seed, uint64_t stream, uint64_t first) {
  k = std::max(std::min(k, n), 0);
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(rng_below(seed, stream, first + uint64_t(i), uint64_t(n - i)));
    std::swap(c[i], c[j]);
  }
  return k;
}

namespace {

// A prior (cx, cy, w, h) as corners.
inline void prior_corners(const float* p, float* box) {
  box[0] = p[0] - 0.5f * p[2];
  box[1] = p[1] - 0.5f * p[3];
  box[2] = p[0] + 0.5f * p[2];
  box[3] = p[1] + 0.5f * p[3];
}

// log sum exp of a row: max in float, the sum of exp(z - max) in double, in order.
inline double row_lse(const float* z, int classes) {
  float m = z[0];
  for (int c = 1; c < classes; ++c) m = std::max(m, z[c]);
  double sum = 0.0;
  for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - double(m));
  return double(m) + std::log(sum);
}

// Smooth-L1 of a box offset's residual and its derivative (SSD's and the box head's beta 1, the
// RPN's 1/9).
inline double smooth_l1(double x, double beta) {
  const double a = std::fabs(x);
  return a < beta ? 0.5 * x * x / beta : a - 0.5 * beta;
}
inline double smooth_l1_grad(double x, double beta) {
  if (std::fabs(x) < beta) return x / beta;
  return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
}

// A ranking value without a negative zero (so that float order and bit order agree).
inline float rank_value(double v) {
  const float f = float(v);
  return f == 0.0f ? 0.0f : f;
}

// Arena pieces (64-byte aligned each).
template <typename T>
T* take(Arena& a, size_t count) {
  return static_cast<T*>(arena_bytes(a, count * sizeof(T)));
}
constexpr size_t kAlignFloats = 16;  // what one arena piece may lose to alignment
size_t floats_for_bytes(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float) + kAlignFloats; }

}  // namespace

// =============================== SSD target assignment ===============================

size_t ssd_assign_scratch_floats(int /*num_priors*/, int /*max_gts_per_batch*/) { return 0; }

void ssd_assign_targets(const float* priors, int num_priors, const float* gt_boxes, const int32_t* gt_labels,
                        const int32_t* gt_first, int n, float iou_threshold, float var_center, float var_size,
                        int32_t* labels_out, float* loc_targets, Arena& /*arena*/) {
  const int P = num_priors;
  for (int img = 0; img < n; ++img) {
    int32_t* lab = labels_out + size_t(img) * P;
    float* lt = loc_targets + size_t(img) * P * 4;
    const int g0 = gt_first[img], g1 = gt_first[img + 1];
    // 1. Each prior's best gt (first on ties): its index in lab (-1: none), its IoU in lt[4p].
    for (int p = 0; p < P; ++p) {
      float pb[4];
      prior_corners(priors + size_t(p) * 4, pb);
      int best = -1;
      float best_iou = -INFINITY;
      for (int g = g0; g < g1; ++g) {
        const float v = box_iou(pb, gt_boxes + size_t(g) * 4);
        if (v > best_iou) best_iou = v, best = g;
      }
      lab[p] = best;
      lt[size_t(p) * 4] = best_iou;
    }
    // 2. Each gt's best prior (first on ties) is forced to it, in gt order (a later gt wins).
    for (int g = g0; g < g1; ++g) {
      int best = -1;
      float best_iou = -INFINITY;
      for (int p = 0; p < P; ++p) {
        float pb[4];
        prior_corners(priors + size_t(p) * 4, pb);
        const float v = box_iou(pb, gt_boxes + size_t(g) * 4);
        if (v > best_iou) best_iou = v, best = p;
      }
      if (best < 0) continue;
      lab[best] = g;
      lt[size_t(best) * 4] = INFINITY;  // forced: above any threshold
    }
    // 3. Labels and encoded offsets.
    for (int p = 0; p < P; ++p) {
      const int g = lab[p];
      float* t = lt + size_t(p) * 4;
      if (g < 0 || !(t[0] >= iou_threshold)) {
        lab[p] = 0;
        t[0] = t[1] = t[2] = t[3] = 0.0f;
        continue;
      }
      const float* pr = priors + size_t(p) * 4;
      const float* gb = gt_boxes + size_t(g) * 4;
      const double pcx = pr[0], pcy = pr[1], pw = pr[2], ph = pr[3];
      const double gcx = 0.5 * (double(gb[0]) + double(gb[2])), gcy = 0.5 * (double(gb[1]) + double(gb[3]));
      const double gw = double(gb[2]) - double(gb[0]), gh = double(gb[3]) - double(gb[1]);
      lab[p] = gt_labels[g];
      t[0] = float((gcx - pcx) / (pw * double(var_center)));
      t[1] = float((gcy - pcy) / (ph * double(var_center)));
      t[2] = float(std::log(gw / pw) / double(var_size));
      t[3] = float(std::log(gh / ph) / double(var_size));
    }
  }
}

// =============================== SSD multibox loss ===============================

// Per image, reused: lse [P] doubles, ranking values [P], negative order [P] ints, flags [P] bytes.
size_t ssd_loss_scratch_floats(int /*n*/, int num_priors) {
  const size_t P = size_t(std::max(num_priors, 0));
  return floats_for_bytes(P * sizeof(double)) + floats_for_bytes(P * sizeof(float)) +
         floats_for_bytes(P * sizeof(int32_t)) + floats_for_bytes(P);
}

void ssd_multibox_loss(const float* conf, const float* loc, const int32_t* labels, const float* loc_targets, int n,
                       int num_priors, int classes, float neg_pos_ratio, float grad_scale, float* dconf, float* dloc,
                       double* loss_sum, int* num_pos, Arena& arena) {
  ArenaScope scope(arena);
  const int P = num_priors, C = classes;
  double* lse = take<double>(arena, size_t(P));
  float* rank = take<float>(arena, size_t(P));
  int32_t* order = take<int32_t>(arena, size_t(P));
  uint8_t* used = take<uint8_t>(arena, size_t(P));  // positive or mined negative
  double total = 0.0;
  int total_pos = 0;
  for (int img = 0; img < n; ++img) {
    const float* z = conf + size_t(img) * P * C;
    const float* l = loc + size_t(img) * P * 4;
    const float* t = loc_targets + size_t(img) * P * 4;
    const int32_t* lab = labels + size_t(img) * P;
    int pos = 0, nneg = 0;
    for (int p = 0; p < P; ++p) {
      const float* zp = z + size_t(p) * C;
      lse[p] = row_lse(zp, C);
      rank[p] = rank_value(lse[p] - double(zp[lab[p]]));
      used[p] = lab[p] > 0;
      if (lab[p] > 0)
        ++pos;
      else
        order[nneg++] = p;
    }
    total_pos += pos;
    if (pos == 0) {
      if (dconf) std::fill(dconf + size_t(img) * P * C, dconf + size_t(img + 1) * P * C, 0.0f);
      if (dloc) std::fill(dloc + size_t(img) * P * 4, dloc + size_t(img + 1) * P * 4, 0.0f);
      continue;
    }
    // Hard negatives: the first k by (cross-entropy against background descending, index ascending).
    const int64_t want = int64_t(std::floor(double(neg_pos_ratio) * double(pos)));
    const int k = int(std::clamp<int64_t>(want, 0, nneg));
    std::partial_sort(order, order + k, order + nneg,
                      [&](int a, int b) { return rank[a] > rank[b] || (rank[a] == rank[b] && a < b); });
    for (int r = 0; r < k; ++r) used[order[r]] = 1;
    // The image's loss, summed in prior order.
    double sum = 0.0;
    for (int p = 0; p < P; ++p) {
      if (!used[p]) continue;
      double term = lse[p] - double(z[size_t(p) * C + lab[p]]);
      if (lab[p] > 0)
        for (int j = 0; j < 4; ++j) {
          const double d = double(l[size_t(p) * 4 + j] - t[size_t(p) * 4 + j]);
          term += smooth_l1(d, 1.0);
        }
      sum += term;
    }
    total += sum / pos;
    const double scale = double(grad_scale) / pos;
    if (dconf)
      for (int p = 0; p < P; ++p) {
        float* g = dconf + (size_t(img) * P + p) * C;
        const float* zp = z + size_t(p) * C;
        if (!used[p]) {
          std::fill(g, g + C, 0.0f);
          continue;
        }
        for (int c = 0; c < C; ++c)
          g[c] = float((std::exp(double(zp[c]) - lse[p]) - (c == lab[p] ? 1.0 : 0.0)) * scale);
      }
    if (dloc)
      for (int p = 0; p < P; ++p)
        for (int j = 0; j < 4; ++j) {
          const size_t e = (size_t(img) * P + p) * 4 + j;
          if (lab[p] <= 0) {
            dloc[e] = 0.0f;
            continue;
          }
          const double d = double(l[size_t(p) * 4 + j] - t[size_t(p) * 4 + j]);
          const double gd = std::fabs(d) < 1.0 ? d : (d > 0.0 ? 1.0 : -1.0);  // (a NaN: -1, as CUDA's)
          dloc[e] = float(gd * scale);
        }
  }
  if (num_pos) *num_pos = total_pos;
  if (loss_sum) *loss_sum += total;
}

// =============================== SSD post-processing ===============================

namespace {

struct Det {
  float score;
  int32_t cls, prior;
};

// The encoding's inverse: (cx, cy, w, h) from the offsets, then corners clipped to [0, 1], in double.
inline void decode_box(const float* l, const float* pr, double vc, double vs, float* box) {
  const double pcx = pr[0], pcy = pr[1], pw = pr[2], ph = pr[3];
  const double cx = pcx + double(l[0]) * vc * pw, cy = pcy + double(l[1]) * vc * ph;
  const double w = pw * std::exp(double(l[2]) * vs), h = ph * std::exp(double(l[3]) * vs);
  box[0] = float(std::clamp(cx - 0.5 * w, 0.0, 1.0));
  box[1] = float(std::clamp(cy - 0.5 * h, 0.0, 1.0));
  box[2] = float(std::clamp(cx + 0.5 * w, 0.0, 1.0));
  box[3] = float(std::clamp(cy + 0.5 * h, 0.0, 1.0));
}

}  // namespace

// Per image, reused: boxes [P,4], scores [P,C], candidates [P] ints, suppressed flags [K] bytes,
// survivors [(C-1)*K] and their order, K = min(pre_nms_topk, P).
size_t ssd_detect_scratch_floats(int /*n*/, int num_priors, int classes, int pre_nms_topk) {
  const size_t P = size_t(std::max(num_priors, 0)), C = size_t(std::max(classes, 1));
  const size_t K = size_t(std::clamp(pre_nms_topk, 0, std::max(num_priors, 0)));
  return floats_for_bytes(P * 4 * sizeof(float)) + floats_for_bytes(P * C * sizeof(float)) +
         floats_for_bytes(P * sizeof(int32_t)) + floats_for_bytes(K) + floats_for_bytes((C - 1) * K * sizeof(Det)) +
         floats_for_bytes((C - 1) * K * sizeof(int32_t));
}

void ssd_detect(const float* conf, const float* loc, const float* priors, int n, int num_priors, int classes,
                float var_center, float var_size, float score_threshold, float nms_iou, int pre_nms_topk, int max_dets,
                float* det_boxes, float* det_scores, int32_t* det_classes, int32_t* det_count, Arena& arena) {
  ArenaScope scope(arena);
  const int P = num_priors, C = classes;
  const int K = std::clamp(pre_nms_topk, 0, std::max(P, 0));
  const int D = std::max(max_dets, 0);
  float* boxes = take<float>(arena, size_t(P) * 4);
  float* scores = take<float>(arena, size_t(P) * C);
  int32_t* cand = take<int32_t>(arena, size_t(P));
  uint8_t* suppressed = take<uint8_t>(arena, size_t(K));
  Det* surv = take<Det>(arena, size_t(std::max(C - 1, 0)) * K);
  int32_t* order = take<int32_t>(arena, size_t(std::max(C - 1, 0)) * K);
  for (int img = 0; img < n; ++img) {
    for (int p = 0; p < P; ++p) {
      decode_box(loc + (size_t(img) * P + p) * 4, priors + size_t(p) * 4, var_center, var_size, boxes + size_t(p) * 4);
      const float* zp = conf + (size_t(img) * P + p) * C;
      const double lse = row_lse(zp, C);
      for (int c = 0; c < C; ++c) scores[size_t(p) * C + c] = float(std::exp(double(zp[c]) - lse));
    }
    int ns = 0;
    for (int c = 1; c < C; ++c) {
      int m = 0;
      for (int p = 0; p < P; ++p)
        if (scores[size_t(p) * C + c] > score_threshold) cand[m++] = p;
      const int kk = std::min(K, m);
      std::partial_sort(cand, cand + kk, cand + m, [&](int a, int b) {
        const float sa = scores[size_t(a) * C + c], sb = scores[size_t(b) * C + c];
        return sa > sb || (sa == sb && a < b);
      });
      std::memset(suppressed, 0, size_t(kk));
      for (int i = 0; i < kk; ++i) {
        if (suppressed[i]) continue;
        const float* bi = boxes + size_t(cand[i]) * 4;
        surv[ns++] = Det{scores[size_t(cand[i]) * C + c], c, cand[i]};
        for (int j = i + 1; j < kk; ++j)
          if (!suppressed[j] && box_iou(bi, boxes + size_t(cand[j]) * 4) > nms_iou) suppressed[j] = 1;
      }
    }
    const int count = std::min(D, ns);
    for (int i = 0; i < ns; ++i) order[i] = i;
    std::partial_sort(order, order + count, order + ns, [&](int a, int b) {
      const Det &x = surv[a], &y = surv[b];
      if (x.score != y.score) return x.score > y.score;
      if (x.cls != y.cls) return x.cls < y.cls;
      return x.prior < y.prior;
    });
    float* ob = det_boxes + size_t(img) * D * 4;
    float* os = det_scores + size_t(img) * D;
    int32_t* oc = det_classes + size_t(img) * D;
    for (int r = 0; r < D; ++r) {
      if (r < count) {
        const Det& d = surv[order[r]];
        std::memcpy(ob + size_t(r) * 4, boxes + size_t(d.prior) * 4, 4 * sizeof(float));
        os[r] = d.score;
        oc[r] = d.cls;
      } else {
        std::fill(ob + size_t(r) * 4, ob + size_t(r) * 4 + 4, 0.0f);
        os[r] = 0.0f;
        oc[r] = 0;
      }
    }
    det_count[img] = count;
  }
}

// =============================== NMS of sorted boxes ===============================

size_t nms_scratch_floats(int n) { return floats_for_bytes(size_t(std::max(n, 0))); }

int nms_sorted(const float* boxes, int n, float iou_threshold, int max_keep, int32_t* keep, Arena& arena) {
  if (n <= 0 || max_keep <= 0) return 0;
  ArenaScope scope(arena);
  uint8_t* suppressed = take<uint8_t>(arena, size_t(n));
  std::memset(suppressed, 0, size_t(n));
  int count = 0;
  for (int i = 0; i < n && count < max_keep; ++i) {
    if (suppressed[i]) continue;
    keep[count++] = i;
    const float* bi = boxes + size_t(i) * 4;
    for (int j = i + 1; j < n; ++j)
      if (!suppressed[j] && box_iou(bi, boxes + size_t(j) * 4) > iou_threshold) suppressed[j] = 1;
  }
  return count;
}

// =============================== Mask R-CNN's RPN ===============================

namespace {

void check_levels(const int32_t* level_first, int levels, int num_anchors) {
  MLPD_CHECK(levels >= 1 && levels <= 8 && level_first[0] == 0 && level_first[levels] == num_anchors,
             "rpn_proposals: level bounds must run from 0 to the anchor count, 1 to 8 levels");
  for (int l = 0; l < levels; ++l) MLPD_CHECK(level_first[l] <= level_first[l + 1], "rpn_proposals: bad level bounds");
}

}  // namespace

// The level's anchor order [A], its decoded candidates [K, 4] and scores [K], the NMS's keep [K] and
// scratch, the levels' survivors [levels * post, 4], their scores and order.
size_t rpn_proposals_scratch_floats(int /*n*/, int num_anchors, int levels, int pre_nms_topk, int post_nms_topk) {
  const size_t A = size_t(std::max(num_anchors, 0));
  const size_t K = size_t(std::clamp(pre_nms_topk, 0, std::max(num_anchors, 0)));
  const size_t S = size_t(std::max(levels, 0)) * size_t(std::max(post_nms_topk, 0));
  return floats_for_bytes(A * sizeof(int32_t)) + floats_for_bytes(K * 4 * sizeof(float)) +
         floats_for_bytes(K * sizeof(float)) + floats_for_bytes(K * sizeof(int32_t)) + nms_scratch_floats(int(K)) +
         floats_for_bytes(S * 4 * sizeof(float)) + floats_for_bytes(S * sizeof(float)) +
         floats_for_bytes(S * sizeof(int32_t));
}

void rpn_proposals(const float* objectness, const float* deltas, const float* anchors, int n, int num_anchors,
                   const int32_t* level_first, int levels, int img_h, int img_w, int pre_nms_topk, int post_nms_topk,
                   float nms_iou, float min_size, float* boxes, float* scores, int32_t* count, Arena& arena) {
  if (n <= 0) return;
  check_levels(level_first, levels, num_anchors);
  const int A = num_anchors, post = std::max(post_nms_topk, 0);
  const int K = std::clamp(pre_nms_topk, 0, A);
  ArenaScope scope(arena);
  int32_t* order = take<int32_t>(arena, size_t(A));
  float* cand = take<float>(arena, size_t(K) * 4);
  float* cand_score = take<float>(arena, size_t(K));
  int32_t* keep = take<int32_t>(arena, size_t(K));
  float* all = take<float>(arena, size_t(levels) * post * 4);
  float* all_score = take<float>(arena, size_t(levels) * post);
  int32_t* all_order = take<int32_t>(arena, size_t(levels) * post);
  const auto clip = [&](float* b) {
    b[0] = std::clamp(b[0], 0.0f, float(img_w));
    b[1] = std::clamp(b[1], 0.0f, float(img_h));
    b[2] = std::clamp(b[2], 0.0f, float(img_w));
    b[3] = std::clamp(b[3], 0.0f, float(img_h));
  };
  for (int img = 0; img < n; ++img) {
    int total = 0;
    for (int l = 0; l < levels; ++l) {
      const int a0 = level_first[l], m = level_first[l + 1] - a0;
      const float* obj = objectness + size_t(img) * A + a0;
      const float* del = deltas + (size_t(img) * A + a0) * 4;
      const int k = std::min(K, m);
      std::iota(order, order + m, 0);
      std::partial_sort(order, order + k, order + m, [&](int32_t a, int32_t b) {
        return obj[a] > obj[b] || (obj[a] == obj[b] && a < b);
      });
      int c = 0;
      for (int r = 0; r < k; ++r) {
        const int a = order[r];
        float* b = cand + size_t(c) * 4;
        rcnn_decode_box(anchors + (size_t(a0) + a) * 4, del + size_t(a) * 4, 1.0f, 1.0f, 1.0f, 1.0f, b);
        clip(b);
        if (b[2] - b[0] < min_size || b[3] - b[1] < min_size) continue;
        cand_score[c++] = obj[a];
      }
      const int kept = nms_sorted(cand, c, nms_iou, post, keep, arena);
      for (int i = 0; i < kept; ++i, ++total) {
        std::memcpy(all + size_t(total) * 4, cand + size_t(keep[i]) * 4, 4 * sizeof(float));
        all_score[total] = cand_score[keep[i]];
      }
    }
    // Each level's survivors are in descending order already: one level comes out as it is.
    std::iota(all_order, all_order + total, 0);
    std::stable_sort(all_order, all_order + total, [&](int32_t a, int32_t b) { return all_score[a] > all_score[b]; });
    const int out = std::min(total, post);
    float* ob = boxes + size_t(img) * post * 4;
    float* os = scores + size_t(img) * post;
    for (int r = 0; r < post; ++r) {
      if (r < out) {
        std::memcpy(ob + size_t(r) * 4, all + size_t(all_order[r]) * 4, 4 * sizeof(float));
        os[r] = all_score[all_order[r]];
      } else {
        std::fill(ob + size_t(r) * 4, ob + size_t(r) * 4 + 4, 0.0f);
        os[r] = 0.0f;
      }
    }
    count[img] = out;
  }
}

size_t rpn_loss_scratch_floats(int /*n*/) { return 0; }

void rpn_loss_batch(const float* objectness, const float* deltas, int n, int num_anchors,
                    const int32_t* sample_index, const int32_t* sample_first, const int32_t* positive_first,
                    const float* target_deltas, float grad_scale, float* dobjectness, float* ddeltas,
                    double* loss_parts, Arena& /*arena*/) {
  constexpr double kBeta = 1.0 / 9.0;
  const int A = num_anchors;
  double cls_total = 0.0, box_total = 0.0;
  for (int img = 0; img < n; ++img) {
    const float* obj = objectness + size_t(img) * A;
    const float* del = deltas + size_t(img) * A * 4;
    float* dobj = dobjectness + size_t(img) * A;
    float* ddel = ddeltas + size_t(img) * A * 4;
    const int32_t* index = sample_index + sample_first[img];
    const int count = sample_first[img + 1] - sample_first[img];
    const int positives = positive_first[img + 1] - positive_first[img];
    const float* targets = target_deltas + size_t(positive_first[img]) * 4;
    MLPD_CHECK(count >= 0 && positives >= 0 && positives <= count, "rpn_loss_batch: inconsistent sample bounds");
    std::fill(dobj, dobj + A, 0.0f);
    std::fill(ddel, ddel + size_t(A) * 4, 0.0f);
    double cls_sum = 0.0, box_sum = 0.0;
    const double g = count > 0 ? double(grad_scale) / count : 0.0;
    for (int k = 0; k < count; ++k) {
      const int a = index[k];
      MLPD_CHECK(a >= 0 && a < A, "rpn_loss_batch: sampled anchor out of range");
      const double z = obj[a], y = k < positives ? 1.0 : 0.0;
      cls_sum += std::max(z, 0.0) - y * z + std::log1p(std::exp(-std::fabs(z)));
      const double sig = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
      dobj[a] += static_cast<float>((sig - y) * g);
      if (k < positives)
        for (int j = 0; j < 4; ++j) {
          const double x = double(del[size_t(a) * 4 + j]) - targets[size_t(k) * 4 + j];
          box_sum += smooth_l1(x, kBeta);
          ddel[size_t(a) * 4 + j] += static_cast<float>(smooth_l1_grad(x, kBeta) * g);
        }
    }
    cls_total += count > 0 ? cls_sum / count : 0.0;
    box_total += count > 0 ? box_sum / count : 0.0;
  }
  if (loss_parts) {
    loss_parts[0] += cls_total;
    loss_parts[1] += box_total;
  }
}

size_t rcnn_box_loss_scratch_floats(int /*n*/) { return 0; }

void rcnn_box_loss(const float* cls_logits, const float* box_deltas, int n, int classes, const int32_t* labels,
                   const int32_t* row_first, const int32_t* fg_first, const float* target_deltas, float grad_scale,
                   float* dcls, float* dbox, double* loss_parts, Arena& /*arena*/) {
  MLPD_CHECK(classes >= 2, "rcnn_box_loss: need a background and at least one class");
  MLPD_CHECK((cls_logits == nullptr) == (dcls == nullptr), "rcnn_box_loss: logits and their gradient go together");
  const int row = classes * 4;
  double cls_total = 0.0, box_total = 0.0;
  for (int img = 0; img < n; ++img) {
    const int r0 = row_first[img], k = row_first[img + 1] - r0, fg = fg_first[img + 1] - fg_first[img];
    MLPD_CHECK(k >= 0 && fg >= 0 && fg <= k, "rcnn_box_loss: inconsistent row bounds");
    float* db = dbox + size_t(r0) * row;
    std::fill(db, db + size_t(k) * row, 0.0f);
    if (k == 0) continue;
    if (cls_logits) {
      double image_cls = 0.0;
      softmax_xent(cls_logits + size_t(r0) * classes, labels + r0, k, classes, 0.0f, grad_scale / float(k),
                   dcls + size_t(r0) * classes, &image_cls, nullptr);
      cls_total += image_cls / k;
    }
    const double g = double(grad_scale) / k;
    double sum = 0.0;
    for (int i = 0; i < fg; ++i) {
      const int label = labels[r0 + i];
      MLPD_CHECK(label >= 1 && label < classes, "rcnn_box_loss: foreground label outside [1, classes)");
      const size_t at = size_t(i) * row + size_t(label) * 4;
      const float* t = target_deltas + (size_t(fg_first[img]) + i) * 4;
      for (int j = 0; j < 4; ++j) {
        const double x = double(box_deltas[size_t(r0) * row + at + j]) - t[j];
        sum += smooth_l1(x, 1.0);
        db[at + j] = static_cast<float>(smooth_l1_grad(x, 1.0) * g);
      }
    }
    box_total += sum / k;
  }
  if (loss_parts) {
    loss_parts[0] += cls_total;
    loss_parts[1] += box_total;
  }
}

// An image's picked logits, their targets and gradients, contiguous, for sigmoid_bce.
size_t rcnn_mask_loss_scratch_floats(int /*n*/, int rows, int pixels) {
  return 3 * floats_for_bytes(size_t(std::max(rows, 0)) * size_t(std::max(pixels, 0)) * sizeof(float));
}

void rcnn_mask_loss(const float* logits, int n, int rows, int pixels, int classes, const int32_t* labels,
                    const uint8_t* targets, const int32_t* row_first, float grad_scale, float* dlogits,
                    double* loss_sum, Arena& arena) {
  MLPD_CHECK(n >= 0 && rows >= 0 && pixels >= 0 && classes >= 1 && row_first[n] <= rows && row_first[0] == 0,
             "rcnn_mask_loss: inconsistent rows");
  std::fill(dlogits, dlogits + size_t(rows) * pixels * classes, 0.0f);
  ArenaScope scope(arena);
  float* z = take<float>(arena, size_t(rows) * pixels);
  float* t = take<float>(arena, size_t(rows) * pixels);
  float* dz = take<float>(arena, size_t(rows) * pixels);
  double total = 0.0;
  for (int img = 0; img < n; ++img) {
    const int r0 = row_first[img], k = row_first[img + 1] - r0;
    MLPD_CHECK(k >= 0, "rcnn_mask_loss: inconsistent rows");
    const size_t count = size_t(k) * pixels;
    if (count == 0) continue;
    for (int r = 0; r < k; ++r) {
      const int label = labels[r0 + r];
      MLPD_CHECK(label >= 0 && label < classes, "rcnn_mask_loss: a row's label outside [0, classes)");
      for (int p = 0; p < pixels; ++p) {
        const size_t e = size_t(r0 + r) * pixels + p, i = size_t(r) * pixels + p;
        z[i] = logits[e * classes + size_t(label)];
        t[i] = targets[e] ? 1.0f : 0.0f;
      }
    }
    double image = 0.0;
    sigmoid_bce(z, t, static_cast<int>(count), grad_scale / float(count), dz, &image);
    total += image / double(count);
    for (int r = 0; r < k; ++r)
      for (int p = 0; p < pixels; ++p) {
        const size_t e = size_t(r0 + r) * pixels + p;
        dlogits[e * classes + size_t(labels[r0 + r])] += dz[size_t(r) * pixels + p];  // onto 0, as a scatter-add
      }
  }
  if (loss_sum) *loss_sum += total;
}

// The RoI sampler, image by image: each candidate's best gt, the foreground and background lists in
// candidate order, the draws, then the rows.
size_t rcnn_sample_rois_scratch_floats(int /*n*/, int /*max_proposals*/, int /*max_gts*/) { return 0; }

void rcnn_sample_rois(const RoiSampling& s, const float* proposal_boxes, const int32_t* proposal_count,
                      int max_proposals, const float* gt_boxes, const int32_t* gt_labels, const int32_t* gt_first,
                      int n, int max_gts, int max_rows, float* rois, int32_t* row_first, int32_t* fg_first,
                      int32_t* labels, int32_t* matched, float* target_deltas, Arena& /*arena*/) {
  MLPD_CHECK(n >= 0 && max_proposals >= 0 && max_gts >= 0, "rcnn_sample_rois: bad sizes");
  MLPD_CHECK(s.batch >= 0 && uint64_t(s.batch) <= kSampleNegativeCounters,
             "rcnn_sample_rois: sampling batch outside [0, 2^19]");
  MLPD_CHECK(s.pos_fraction >= 0.0f && s.pos_fraction <= 1.0f, "rcnn_sample_rois: pos_fraction outside [0, 1]");
  MLPD_CHECK(s.key + uint64_t(n) <= kSampleMaxKey, "rcnn_sample_rois: sampling key must stay below 2^44");
  MLPD_CHECK(int64_t(max_rows) >= int64_t(n) * s.batch, "rcnn_sample_rois: max_rows below n * batch");
  std::fill(rois, rois + size_t(max_rows) * 5, 0.0f);
  std::fill(labels, labels + max_rows, 0);
  std::fill(matched, matched + max_rows, -1);
  std::fill(target_deltas, target_deltas + size_t(max_rows) * 4, 0.0f);
  row_first[0] = fg_first[0] = 0;
  std::vector<int32_t> fg, bg, match_of;
  for (int i = 0; i < n; ++i) {
    const int P = proposal_count[i], g0 = gt_first[i], G = gt_first[i + 1] - g0;
    MLPD_CHECK(P >= 0 && P <= max_proposals, "rcnn_sample_rois: a proposal count outside [0, max_proposals]");
    MLPD_CHECK(G >= 0 && G <= max_gts, "rcnn_sample_rois: an image's gt count outside [0, max_gts]");
    const float* gts = gt_boxes + size_t(g0) * 4;
    for (int g = 0; g < G; ++g)
      MLPD_CHECK(gt_labels[g0 + g] >= 1, "rcnn_sample_rois: a ground-truth label is not >= 1");
    const auto candidate = [&](int c) {
      return c < P ? proposal_boxes + (size_t(i) * max_proposals + size_t(c)) * 4 : gts + size_t(c - P) * 4;
    };
    fg.clear();
    bg.clear();
    match_of.assign(size_t(P + G), -1);
    for (int c = 0; c < P + G; ++c) {
      float best = 0.0f;
      int gt = -1;
      for (int g = 0; g < G; ++g) {
        const float v = box_iou(candidate(c), gts + size_t(g) * 4);
        if (gt < 0 || v > best) best = v, gt = g;
      }
      if (gt >= 0 && best >= s.fg_iou) {
        fg.push_back(c);
        match_of[size_t(c)] = gt;
      } else if (best >= s.bg_iou_lo && best < s.bg_iou_hi) {
        bg.push_back(c);
      }
    }
    const uint64_t first = (s.key + uint64_t(i)) * kSampleKeyCounters;
    const int nf = draw_without_replacement(fg.data(), int(fg.size()), sample_max_positives(s.batch, s.pos_fraction),
                                            s.seed, s.stream, first);
    const int nb = draw_without_replacement(bg.data(), int(bg.size()), s.batch - nf, s.seed, s.stream,
                                            first + kSampleNegativeCounters);
    const int r0 = row_first[i], t0 = fg_first[i];
    for (int r = 0; r < nf + nb; ++r) {
      const int c = r < nf ? fg[size_t(r)] : bg[size_t(r - nf)];
      const float* box = candidate(c);
      float* row = rois + size_t(r0 + r) * 5;
      row[0] = float(i);
      std::copy(box, box + 4, row + 1);
      if (r < nf) {
        const int gt = match_of[size_t(c)];
        labels[r0 + r] = gt_labels[g0 + gt];
        matched[r0 + r] = gt;
        rcnn_encode_box(box, gts + size_t(gt) * 4, 10.0f, 10.0f, 5.0f, 5.0f, target_deltas + size_t(t0 + r) * 4);
      }
    }
    row_first[i + 1] = r0 + nf + nb;
    fg_first[i + 1] = t0 + nf;
  }
}

}  // namespace mlpd
