// The detection ops (ssd, maskrcnn) on the GPU, with the CPU's semantics and decisions
// (kernels/cpu/detection.cpp): IoU in float with each operation rounded on its own (__f*_rn: nvcc
// would otherwise fuse area_a + w*h), log-sum-exp, softmax and the decoding in double rounded to
// float once, and every ranking a total order on (value, index). So matches, mined negatives,
// candidate order and suppressions are those of the CPU; values agree to rounding.
//
// Block-wide tools (blocks of kBlock threads), used by the per-image and per-class kernels:
//   block_count    ballot counts: how many flags before this thread's, and the block's total;
//   radix_select   the k-th largest of 32-bit keys (4 passes of an 8-bit histogram in shared memory)
//                  and how many of the keys equal to it are taken (the lowest-indexed ones);
//   select_emit    the selected elements in index order, each with its rank;
//   bitonic_sort   ascending 64-bit keys (value-derived high word, index low word) in scratch;
//   select_survivors  the best of a block's sorted slots, sorted (the per-image merges).
// ssd_assign_targets: a thread per (image, prior) finds its best gt; a block per image then forces,
//   gt after gt, each gt's best prior (a block argmax); a thread per (image, prior) encodes.
// ssd_multibox_loss: a thread per (image, prior): log-sum-exp, cross-entropy and the prior's loss
//   term; a block per image: positives, the hard negatives (radix select on the cross-entropy) and
//   the image loss; a thread per element for dconf and dloc; one block sums the image losses.
// ssd_detect: a thread per (image, prior) decodes its box and softmax; a block per (image, class)
//   selects its top pre_nms_topk, sorts them and runs greedy NMS (one candidate after the other);
//   a block per image selects and sorts the top max_dets survivors and writes the outputs.
// nms_sorted: the bitmask NMS of torchvision: blocks of 64x64 box pairs write suppression masks,
//   one warp walks the boxes in order.
// rpn_proposals: a block per (image, level) selects its top pre_nms_topk anchors, sorts them,
//   decodes and clips their boxes, drops the small ones and runs greedy NMS, keeping the first
//   post_nms_topk; a block per image selects and sorts the top post_nms_topk over its levels.
// rpn_loss_batch: a block per image sums its samples' terms (a fixed tree) and writes their
//   gradients into the zeroed buffers; one thread adds the images in order.
// rcnn_box_loss: a block per image, a thread per RoI (its softmax cross-entropy and gradient row,
//   its class deltas' smooth-L1), the sums by a fixed tree; one thread adds the images in order.
// rcnn_mask_loss: a block per image over its rows' pixels (sigmoid_bce's arithmetic on the row's
//   label channel, written into the zeroed gradient), the sum by a fixed tree; then as above.
// No atomics but shared-memory histogram counts (exact) and rpn_loss_batch's gradient adds, one per
// sampled anchor (two where an anchor is sampled twice, in either order the same sum): every run
// gives the same bits.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <math_constants.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/rng.cuh"

namespace mlpd::cuda {

namespace {

constexpr int kBlock = int(kReduceThreads);  // block_sum's block size
constexpr int kBlockWarps = kBlock / 32;
constexpr uint64_t kNone = ~uint64_t(0);  // an empty or suppressed sort slot
constexpr size_t kAlignFloats = 16;       // what one arena piece may lose to alignment
constexpr size_t kMaxShared = 48 * 1024;

size_t floats_for_bytes(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float) + kAlignFloats; }
template <typename T>
T* take(Arena& a, size_t count) {
  return static_cast<T*>(arena_bytes(a, count * sizeof(T)));
}
size_t pow2_at_least(size_t x) {
  size_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// ---- arithmetic shared with the CPU, bit for bit ----
struct Box4 {
  float x1, y1, x2, y2;
};
__device__ __forceinline__ Box4 load_box(const float* b) { return Box4{b[0], b[1], b[2], b[3]}; }
__device__ __forceinline__ Box4 prior_corners(const float* p) {
  const float hw = 0.5f * p[2], hh = 0.5f * p[3];  // exact
  return Box4{__fsub_rn(p[0], hw), __fsub_rn(p[1], hh), __fadd_rn(p[0], hw), __fadd_rn(p[1], hh)};
}
// IoU as kernels/cpu/detection.cpp's box_iou: the same operations in the same order, unfused.
__device__ __forceinline__ float box_iou(const Box4& a, const Box4& b) {
  const float iw = fmaxf(0.0f, __fsub_rn(fminf(a.x2, b.x2), fmaxf(a.x1, b.x1)));
  const float ih = fmaxf(0.0f, __fsub_rn(fminf(a.y2, b.y2), fmaxf(a.y1, b.y1)));
  const float inter = __fmul_rn(iw, ih);
  const float area_a = __fmul_rn(__fsub_rn(a.x2, a.x1), __fsub_rn(a.y2, a.y1));
  const float area_b = __fmul_rn(__fsub_rn(b.x2, b.x1), __fsub_rn(b.y2, b.y1));
  const float uni = __fsub_rn(__fadd_rn(area_a, area_b), inter);
  return uni > 0.0f ? __fdiv_rn(inter, uni) : 0.0f;
}
// log sum exp of a row, as the CPU's row_lse: max in float, the sum in double, in order.
__device__ __forceinline__ double row_lse(const float* z, int classes) {
  float m = z[0];
  for (int c = 1; c < classes; ++c) m = fmaxf(m, z[c]);
  double sum = 0.0;
  for (int c = 0; c < classes; ++c) sum += exp(double(z[c]) - double(m));
  return double(m) + log(sum);
}
// Float order as unsigned order (negative zero first made positive, as the CPU's rank_value).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// ---- block-wide tools (blockDim.x == kBlock) ----
struct Count {
  int before, total;
};
// This thread's count of set flags among the lower threads, and the block's total.
__device__ Count block_count(bool flag) {
  __shared__ int warp_total[kBlockWarps];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0) warp_total[warp] = __popc(ballot);
  __syncthreads();
  Count c{__popc(ballot & ((1u << lane) - 1u)), 0};
  for (int w = 0; w < kBlockWarps; ++w) {
    if (w < warp) c.before += warp_total[w];
    c.total += warp_total[w];
  }
  __syncthreads();  // warp_total is reused by the next call
  return c;
}

// Selection of the k largest keys, ties broken by lower index: every key above `key`, and the first
// `ties` (in index order) of the keys equal to it.
struct Cut {
  uint32_t key;
  int ties;
};
// key_of(i, &k) -> false where element i takes no part. Needs 1 <= k <= the number taking part.
template <typename KeyFn>
__device__ Cut radix_select(const KeyFn& key_of, int count, int k) {
  __shared__ int hist[256];
  __shared__ uint32_t s_prefix;
  __shared__ int s_need;
  if (threadIdx.x == 0) s_prefix = 0, s_need = k;
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = int(threadIdx.x); b < 256; b += kBlock) hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix;
    for (int i = int(threadIdx.x); i < count; i += kBlock) {
      uint32_t key;
      if (key_of(i, &key) && (key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int need = s_need, b = 255;
      for (; b > 0 && hist[b] < need; --b) need -= hist[b];
      s_need = need;
      s_prefix = prefix | (uint32_t(b) << shift);
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const Cut cut{s_prefix, s_need};
  __syncthreads();  // the shared state is reused by the next call
  return cut;
}

// emit(i, rank) for every selected element, rank = its place among them in index order.
template <typename KeyFn, typename EmitFn>
__device__ void select_emit(const KeyFn& key_of, int count, Cut cut, const EmitFn& emit) {
  int ties_seen = 0, emitted = 0;
  for (int start = 0; start < count; start += kBlock) {
    const int i = start + int(threadIdx.x);
    uint32_t key = 0;
    const bool part = i < count && key_of(i, &key);
    const bool tie = part && key == cut.key;
    const Count t = block_count(tie);
    const bool take = (part && key > cut.key) || (tie && ties_seen + t.before < cut.ties);
    const Count s = block_count(take);
    if (take) emit(i, emitted + s.before);
    ties_seen += t.total;
    emitted += s.total;
  }
}

// Ascending sort of a[0, m), m a power of two, by the block.
__device__ void bitonic_sort(uint64_t* a, int m) {
  __syncthreads();
  for (int k = 2; k <= m; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = int(threadIdx.x); i < m; i += kBlock) {
        const int l = i ^ j;
        if (l > i) {
          const uint64_t x = a[i], y = a[l];
          if ((x > y) == ((i & k) == 0)) a[i] = y, a[l] = x;
        }
      }
      __syncthreads();
    }
}

// The first `limit` of the sort slots slots[0, count) that hold a key (not kNone), in key order
// (the high word, then the slot), into fin[0, M2) as (high word | slot), the rest kNone (M2 a power
// of two at least min(limit, count)). Returns how many.
__device__ int select_survivors(const uint64_t* slots, int count, int limit, uint64_t* fin, int M2) {
  auto key_of = [&](int i, uint32_t* key) {
    const uint64_t k = slots[i];
    if (k == kNone) return false;
    *key = ~uint32_t(k >> 32);
    return true;
  };
  double mine = 0.0;
  for (int i = int(threadIdx.x); i < count; i += kBlock) mine += slots[i] != kNone ? 1.0 : 0.0;
  const int survivors = int(block_sum(mine));
  const int kk = survivors < limit ? survivors : limit;
  for (int i = kk + int(threadIdx.x); i < M2; i += kBlock) fin[i] = kNone;
  if (kk > 0) {
    const Cut cut = radix_select(key_of, count, kk);
    select_emit(key_of, count, cut, [&](int i, int r) { fin[r] = (slots[i] & 0xffffffff00000000ull) | uint32_t(i); });
  }
  bitonic_sort(fin, M2);
  return kk;
}

// =============================== SSD target assignment ===============================

// 1. Each prior's best gt (first on ties): its index into labels (-1: none), its IoU into loc[.., 0].
__global__ void assign_best_gt_kernel(const float* __restrict__ priors, int P, const float* __restrict__ gt_boxes,
                                      const int32_t* __restrict__ gt_first, int n, int32_t* __restrict__ labels,
                                      float* __restrict__ loc) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < size_t(n) * P;
       e += size_t(gridDim.x) * blockDim.x) {
    const int img = int(e / size_t(P)), p = int(e % size_t(P));
    const Box4 pb = prior_corners(priors + size_t(p) * 4);
    int best = -1;
    float best_iou = -INFINITY;
    for (int g = gt_first[img]; g < gt_first[img + 1]; ++g) {
      const float v = box_iou(pb, load_box(gt_boxes + size_t(g) * 4));
      if (v > best_iou) best_iou = v, best = g;
    }
    labels[e] = best;
    loc[e * 4] = best_iou;
  }
}

// 2. One block per image: gt after gt, its best prior (first on ties) is forced to it.
__global__ void __launch_bounds__(kBlock)
    assign_force_kernel(const float* __restrict__ priors, int P, const float* __restrict__ gt_boxes,
                        const int32_t* __restrict__ gt_first, int32_t* __restrict__ labels, float* __restrict__ loc) {
  __shared__ float sv[kBlock];
  __shared__ int sp[kBlock];
  const int img = int(blockIdx.x), t = int(threadIdx.x);
  for (int g = gt_first[img]; g < gt_first[img + 1]; ++g) {
    const Box4 gb = load_box(gt_boxes + size_t(g) * 4);
    float best_iou = -INFINITY;
    int best = INT32_MAX;
    for (int p = t; p < P; p += kBlock) {
      const float v = box_iou(prior_corners(priors + size_t(p) * 4), gb);
      if (v > best_iou) best_iou = v, best = p;
    }
    sv[t] = best_iou;
    sp[t] = best;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s /= 2) {
      if (t < s && (sv[t + s] > sv[t] || (sv[t + s] == sv[t] && sp[t + s] < sp[t])))
        sv[t] = sv[t + s], sp[t] = sp[t + s];
      __syncthreads();
    }
    if (t == 0 && sp[0] < P) {
      labels[size_t(img) * P + sp[0]] = g;
      loc[(size_t(img) * P + sp[0]) * 4] = INFINITY;  // forced: above any threshold
    }
    __syncthreads();
  }
}

// 3. Labels and encoded offsets (double, as the CPU).
__global__ void assign_encode_kernel(const float* __restrict__ priors, int P, const float* __restrict__ gt_boxes,
                                     const int32_t* __restrict__ gt_labels, int n, float iou_threshold,
                                     double var_center, double var_size, int32_t* __restrict__ labels,
                                     float* __restrict__ loc) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < size_t(n) * P;
       e += size_t(gridDim.x) * blockDim.x) {
    const int p = int(e % size_t(P)), g = labels[e];
    float* t = loc + e * 4;
    if (g < 0 || !(t[0] >= iou_threshold)) {
      labels[e] = 0;
      t[0] = t[1] = t[2] = t[3] = 0.0f;
      continue;
    }
    const float* pr = priors + size_t(p) * 4;
    const float* gb = gt_boxes + size_t(g) * 4;
    const double pcx = pr[0], pcy = pr[1], pw = pr[2], ph = pr[3];
    const double gcx = 0.5 * (double(gb[0]) + double(gb[2])), gcy = 0.5 * (double(gb[1]) + double(gb[3]));
    const double gw = double(gb[2]) - double(gb[0]), gh = double(gb[3]) - double(gb[1]);
    labels[e] = gt_labels[g];
    t[0] = float((gcx - pcx) / (pw * var_center));
    t[1] = float((gcy - pcy) / (ph * var_center));
    t[2] = float(log(gw / pw) / var_size);
    t[3] = float(log(gh / ph) / var_size);
  }
}

// =============================== SSD multibox loss ===============================

struct LossScratch {
  double* lse;       // [n*P]
  double* term;      // [n*P] the prior's loss if counted: cross-entropy (+ smooth-L1 for a positive)
  float* rank;       // [n*P] cross-entropy against the prior's label (background for a negative)
  uint8_t* used;     // [n*P] positive or mined negative
  double* img_loss;  // [n]
  int* img_pos;      // [n]
  double* total;     // [1]
  int* total_pos;    // [1]
};

// Smooth-L1 of a box offset's residual and its derivative, as the CPU's (SSD's and the box head's
// beta 1, the RPN's 1/9).
__device__ __forceinline__ double smooth_l1(double x, double beta) {
  const double a = fabs(x);
  return a < beta ? 0.5 * x * x / beta : a - 0.5 * beta;
}
__device__ __forceinline__ double smooth_l1_grad(double x, double beta) {
  if (fabs(x) < beta) return x / beta;
  return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
}

__global__ void loss_prior_kernel(const float* __restrict__ conf, const float* __restrict__ loc,
                                  const int32_t* __restrict__ labels, const float* __restrict__ loc_targets, int n,
                                  int P, int C, LossScratch s) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < size_t(n) * P;
       e += size_t(gridDim.x) * blockDim.x) {
    const float* z = conf + e * C;
    const int label = labels[e];
    const double lse = row_lse(z, C);
    const float rank = float(lse - double(z[label]));
    s.lse[e] = lse;
    s.rank[e] = rank == 0.0f ? 0.0f : rank;
    double term = lse - double(z[label]);
    if (label > 0)
      for (int j = 0; j < 4; ++j) term += smooth_l1(double(__fsub_rn(loc[e * 4 + j], loc_targets[e * 4 + j])), 1.0);
    s.term[e] = term;
  }
}

// One block per image: positives, the mined negatives, the image's loss.
__global__ void __launch_bounds__(kBlock)
    loss_mine_kernel(const int32_t* __restrict__ labels, int P, float neg_pos_ratio, LossScratch s) {
  const int img = int(blockIdx.x);
  const int32_t* lab = labels + size_t(img) * P;
  const float* rank = s.rank + size_t(img) * P;
  uint8_t* used = s.used + size_t(img) * P;
  double mine = 0.0;
  for (int p = int(threadIdx.x); p < P; p += kBlock) {
    used[p] = lab[p] > 0;
    mine += lab[p] > 0 ? 1.0 : 0.0;
  }
  const int pos = int(block_sum(mine));
  const int nneg = P - pos;
  const double want = floor(double(neg_pos_ratio) * double(pos));
  const int k = pos == 0 || want <= 0.0 ? 0 : (want >= double(nneg) ? nneg : int(want));
  auto key_of = [&](int p, uint32_t* key) {
    if (lab[p] > 0) return false;
    *key = order_key(rank[p]);
    return true;
  };
  if (k > 0) {
    const Cut cut = radix_select(key_of, P, k);
    select_emit(key_of, P, cut, [&](int p, int) { used[p] = 1; });
  }
  __syncthreads();
  double sum = 0.0;
  for (int p = int(threadIdx.x); p < P; p += kBlock)
    if (used[p]) sum += s.term[size_t(img) * P + p];
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    s.img_loss[img] = pos > 0 ? sum / pos : 0.0;
    s.img_pos[img] = pos;
  }
}

__global__ void loss_dconf_kernel(const float* __restrict__ conf, const int32_t* __restrict__ labels, int n, int P,
                                  int C, float grad_scale, LossScratch s, float* __restrict__ dconf) {
  const size_t total = size_t(n) * P * C;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const size_t prior = e / size_t(C);
    const int c = int(e % size_t(C));
    const int pos = s.img_pos[prior / size_t(P)];
    if (!s.used[prior] || pos == 0) {
      dconf[e] = 0.0f;
      continue;
    }
    const double scale = double(grad_scale) / pos;
    dconf[e] = float((exp(double(conf[e]) - s.lse[prior]) - (c == labels[prior] ? 1.0 : 0.0)) * scale);
  }
}

__global__ void loss_dloc_kernel(const float* __restrict__ loc, const float* __restrict__ loc_targets,
                                 const int32_t* __restrict__ labels, int n, int P, float grad_scale, LossScratch s,
                                 float* __restrict__ dloc) {
  const size_t total = size_t(n) * P * 4;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const size_t prior = e / 4;
    const int pos = s.img_pos[prior / size_t(P)];
    if (labels[prior] <= 0 || pos == 0) {
      dloc[e] = 0.0f;
      continue;
    }
    const double d = double(__fsub_rn(loc[e], loc_targets[e]));
    const double gd = fabs(d) < 1.0 ? d : (d > 0.0 ? 1.0 : -1.0);
    dloc[e] = float(gd * (double(grad_scale) / pos));
  }
}

// The images' losses and positives summed; the loss added to *loss_sum where given.
__global__ void __launch_bounds__(kBlock) loss_total_kernel(int n, LossScratch s, double* __restrict__ loss_sum) {
  double l = 0.0, p = 0.0;
  for (int i = int(threadIdx.x); i < n; i += kBlock) {
    l += s.img_loss[i];
    p += double(s.img_pos[i]);
  }
  l = block_sum(l);
  p = block_sum(p);
  if (threadIdx.x == 0) {
    *s.total = l;
    *s.total_pos = int(p);
    if (loss_sum) *loss_sum += l;
  }
}

// =============================== SSD post-processing ===============================

// Boxes [n,P,4] decoded (double, the products unfused as the CPU's) and scores [n,C,P] (class-major).
__global__ void detect_prepare_kernel(const float* __restrict__ conf, const float* __restrict__ loc,
                                      const float* __restrict__ priors, int n, int P, int C, double vc, double vs,
                                      float* __restrict__ boxes, float* __restrict__ scores) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < size_t(n) * P;
       e += size_t(gridDim.x) * blockDim.x) {
    const size_t img = e / size_t(P), p = e % size_t(P);
    const float* l = loc + e * 4;
    const float* pr = priors + p * 4;
    const double pcx = pr[0], pcy = pr[1], pw = pr[2], ph = pr[3];
    const double cx = __dadd_rn(pcx, __dmul_rn(__dmul_rn(double(l[0]), vc), pw));
    const double cy = __dadd_rn(pcy, __dmul_rn(__dmul_rn(double(l[1]), vc), ph));
    const double w = __dmul_rn(pw, exp(__dmul_rn(double(l[2]), vs)));
    const double h = __dmul_rn(ph, exp(__dmul_rn(double(l[3]), vs)));
    float* b = boxes + e * 4;
    b[0] = float(fmin(fmax(__dsub_rn(cx, 0.5 * w), 0.0), 1.0));
    b[1] = float(fmin(fmax(__dsub_rn(cy, 0.5 * h), 0.0), 1.0));
    b[2] = float(fmin(fmax(__dadd_rn(cx, 0.5 * w), 0.0), 1.0));
    b[3] = float(fmin(fmax(__dadd_rn(cy, 0.5 * h), 0.0), 1.0));
    const float* z = conf + e * C;
    const double lse = row_lse(z, C);
    for (int c = 0; c < C; ++c) scores[(img * C + c) * P + p] = float(exp(double(z[c]) - lse));
  }
}

// One block per (image, class >= 1): the top K candidates (score > threshold) sorted by (score
// descending, prior ascending) into sorted[0, M) as keys (~order_key(score) << 32 | prior), the
// rest kNone; then greedy NMS, a suppressed candidate's key becoming kNone.
__global__ void __launch_bounds__(kBlock)
    detect_class_kernel(const float* __restrict__ boxes, const float* __restrict__ scores, int P, int C,
                        float score_threshold, float nms_iou, int K, int M, uint64_t* __restrict__ sorted_all) {
  const int img = int(blockIdx.x) / (C - 1), c = 1 + int(blockIdx.x) % (C - 1);
  const float* sc = scores + (size_t(img) * C + c) * P;
  const float* bx = boxes + size_t(img) * P * 4;
  uint64_t* sorted = sorted_all + size_t(blockIdx.x) * M;
  auto key_of = [&](int p, uint32_t* key) {
    const float v = sc[p];
    if (!(v > score_threshold)) return false;
    *key = order_key(v);
    return true;
  };
  double mine = 0.0;
  for (int p = int(threadIdx.x); p < P; p += kBlock) mine += sc[p] > score_threshold ? 1.0 : 0.0;
  const int candidates = int(block_sum(mine));
  const int kk = candidates < K ? candidates : K;
  for (int i = kk + int(threadIdx.x); i < M; i += kBlock) sorted[i] = kNone;
  if (kk > 0) {
    const Cut cut = radix_select(key_of, P, kk);
    select_emit(key_of, P, cut,
                [&](int p, int r) { sorted[r] = (uint64_t(~order_key(sc[p])) << 32) | uint64_t(uint32_t(p)); });
  }
  bitonic_sort(sorted, M);
  for (int i = 0; i < kk; ++i) {
    const uint64_t ki = sorted[i];
    if (ki != kNone) {
      const Box4 bi = load_box(bx + size_t(uint32_t(ki)) * 4);
      for (int j = i + 1 + int(threadIdx.x); j < kk; j += kBlock) {
        const uint64_t kj = sorted[j];
        if (kj != kNone && box_iou(bi, load_box(bx + size_t(uint32_t(kj)) * 4)) > nms_iou) sorted[j] = kNone;
      }
    }
    __syncthreads();
  }
}

// One block per image: the top D of its classes' survivors by (score descending, then position in
// sorted_all: class, then prior), sorted in final[0, M2), and the outputs.
__global__ void __launch_bounds__(kBlock)
    detect_final_kernel(const float* __restrict__ boxes, const uint64_t* __restrict__ sorted_all, int P, int C, int M,
                        int D, int M2, uint64_t* __restrict__ final_all, float* __restrict__ det_boxes,
                        float* __restrict__ det_scores, int32_t* __restrict__ det_classes,
                        int32_t* __restrict__ det_count) {
  const int img = int(blockIdx.x);
  const int count = (C - 1) * M;
  const uint64_t* sorted = sorted_all + size_t(img) * count;
  uint64_t* fin = final_all + size_t(img) * M2;
  const int kk = select_survivors(sorted, count, D, fin, M2);
  for (int r = int(threadIdx.x); r < D; r += kBlock) {
    float* ob = det_boxes + (size_t(img) * D + r) * 4;
    const size_t o = size_t(img) * D + r;
    if (r < kk) {
      const uint64_t f = fin[r];
      const int i = int(uint32_t(f));
      const int prior = int(uint32_t(sorted[i]));
      const float* b = boxes + (size_t(img) * P + prior) * 4;
      ob[0] = b[0], ob[1] = b[1], ob[2] = b[2], ob[3] = b[3];
      det_scores[o] = key_value(~uint32_t(f >> 32));
      det_classes[o] = 1 + i / M;
    } else {
      ob[0] = ob[1] = ob[2] = ob[3] = 0.0f;
      det_scores[o] = 0.0f;
      det_classes[o] = 0;
    }
  }
  if (threadIdx.x == 0) det_count[img] = kk;
}

struct DetectLayout {
  int K, M, M2;  // candidates per class, its sort size (a power of two), the final sort size
};
DetectLayout detect_layout(int num_priors, int classes, int pre_nms_topk) {
  DetectLayout l;
  l.K = pre_nms_topk < 0 ? 0 : (pre_nms_topk > num_priors ? num_priors : pre_nms_topk);
  l.M = int(pow2_at_least(size_t(l.K)));
  l.M2 = int(pow2_at_least(size_t(classes > 1 ? classes - 1 : 0) * size_t(l.M)));
  return l;
}

// =============================== NMS of sorted boxes ===============================

constexpr int kNmsBlock = 64;

// Block (col, row) of 64x64 pairs: mask[i, col] bit t = box col*64+t, after i, overlaps box i.
__global__ void __launch_bounds__(kNmsBlock) nms_mask_kernel(const float* __restrict__ boxes, int n, int words,
                                                             float iou_threshold, uint64_t* __restrict__ mask) {
  const int row = int(blockIdx.y), col = int(blockIdx.x);
  if (col < row) return;  // never read: the walk reads from a box's own word on
  __shared__ Box4 cols[kNmsBlock];
  const int t = int(threadIdx.x);
  const int col_n = min(kNmsBlock, n - col * kNmsBlock);
  if (t < col_n) cols[t] = load_box(boxes + (size_t(col) * kNmsBlock + t) * 4);
  __syncthreads();
  const int i = row * kNmsBlock + t;
  if (i >= n) return;
  const Box4 bi = load_box(boxes + size_t(i) * 4);
  uint64_t bits = 0;
  for (int j = row == col ? t + 1 : 0; j < col_n; ++j)
    if (box_iou(bi, cols[j]) > iou_threshold) bits |= uint64_t(1) << j;
  mask[size_t(i) * words + col] = bits;
}

// One warp: the boxes in order; a box not yet suppressed is kept and suppresses its mask's boxes.
__global__ void nms_walk_kernel(const uint64_t* __restrict__ mask, int n, int words, int max_keep,
                                int32_t* __restrict__ keep, int* __restrict__ count_out) {
  extern __shared__ uint64_t removed[];
  const int lane = int(threadIdx.x);
  for (int w = lane; w < words; w += 32) removed[w] = 0;
  __syncwarp();
  int count = 0;
  for (int i = 0; i < n && count < max_keep; ++i) {
    const int w = i / kNmsBlock;
    if (removed[w] & (uint64_t(1) << (i % kNmsBlock))) continue;
    if (lane == 0) keep[count] = i;
    ++count;
    for (int x = w + lane; x < words; x += 32) removed[x] |= mask[size_t(i) * words + x];
    __syncwarp();
  }
  if (lane == 0) *count_out = count;
}


// =============================== Mask R-CNN's RPN ===============================

constexpr int kMaxLevels = 8;
struct LevelBounds {
  int first[kMaxLevels + 1];
};

// kernels/cpu/detection.cpp's rcnn_decode_box with weights 1 and its clamp (size_clip, computed on
// the host by the same std::log), each double operation rounded on its own, then clipped as
// std::clamp does.
__device__ __forceinline__ Box4 decode_clip(const float* ref, const float* delta, double size_clip, float img_h,
                                            float img_w) {
  const double wa = __dsub_rn(double(ref[2]), double(ref[0])), ha = __dsub_rn(double(ref[3]), double(ref[1]));
  const double cax = __dadd_rn(double(ref[0]), 0.5 * wa), cay = __dadd_rn(double(ref[1]), 0.5 * ha);
  const double dw = size_clip < double(delta[2]) ? size_clip : double(delta[2]);  // std::min's rule (NaN kept)
  const double dh = size_clip < double(delta[3]) ? size_clip : double(delta[3]);
  const double cx = __dadd_rn(cax, __dmul_rn(double(delta[0]), wa));
  const double cy = __dadd_rn(cay, __dmul_rn(double(delta[1]), ha));
  const double bw = __dmul_rn(exp(dw), wa), bh = __dmul_rn(exp(dh), ha);
  const auto clamp = [](float v, float hi) { return v < 0.0f ? 0.0f : (hi < v ? hi : v); };
  return Box4{clamp(float(__dsub_rn(cx, 0.5 * bw)), img_w), clamp(float(__dsub_rn(cy, 0.5 * bh)), img_h),
              clamp(float(__dadd_rn(cx, 0.5 * bw)), img_w), clamp(float(__dadd_rn(cy, 0.5 * bh)), img_h)};
}

// One block per (image, level): the level's top k anchors sorted by (objectness descending, anchor
// ascending) into sorted[0, M) as keys (~order_key(objectness) << 32 | anchor in the level), their
// boxes in cand[0, k); a dropped (small), suppressed or surplus candidate's key becomes kNone.
__global__ void __launch_bounds__(kBlock)
    proposal_level_kernel(const float* __restrict__ objectness, const float* __restrict__ deltas,
                          const float* __restrict__ anchors, int A, LevelBounds lb, int L, float img_h, float img_w,
                          int K, int M, int post, float nms_iou, float min_size, double size_clip,
                          uint64_t* __restrict__ sorted_all, float* __restrict__ cand_all) {
  const int img = int(blockIdx.x) / L, l = int(blockIdx.x) % L;
  const int a0 = lb.first[l], m = lb.first[l + 1] - a0;
  const float* obj = objectness + size_t(img) * A + a0;
  const float* del = deltas + (size_t(img) * A + a0) * 4;
  const float* anc = anchors + size_t(a0) * 4;
  uint64_t* sorted = sorted_all + size_t(blockIdx.x) * M;
  float* cand = cand_all + size_t(blockIdx.x) * K * 4;
  const int k = m < K ? m : K;
  for (int i = k + int(threadIdx.x); i < M; i += kBlock) sorted[i] = kNone;
  auto key_of = [&](int i, uint32_t* key) {
    *key = order_key(obj[i]);
    return true;
  };
  if (k > 0) {
    const Cut cut = radix_select(key_of, m, k);
    select_emit(key_of, m, cut,
                [&](int i, int r) { sorted[r] = (uint64_t(~order_key(obj[i])) << 32) | uint64_t(uint32_t(i)); });
  }
  bitonic_sort(sorted, M);
  for (int r = int(threadIdx.x); r < k; r += kBlock) {
    const int i = int(uint32_t(sorted[r]));
    const Box4 b = decode_clip(anc + size_t(i) * 4, del + size_t(i) * 4, size_clip, img_h, img_w);
    float* c = cand + size_t(r) * 4;
    c[0] = b.x1, c[1] = b.y1, c[2] = b.x2, c[3] = b.y2;
    if (__fsub_rn(b.x2, b.x1) < min_size || __fsub_rn(b.y2, b.y1) < min_size) sorted[r] = kNone;
  }
  __syncthreads();
  for (int i = 0; i < k; ++i) {
    if (sorted[i] != kNone) {
      const Box4 bi = load_box(cand + size_t(i) * 4);
      for (int j = i + 1 + int(threadIdx.x); j < k; j += kBlock)
        if (sorted[j] != kNone && box_iou(bi, load_box(cand + size_t(j) * 4)) > nms_iou) sorted[j] = kNone;
    }
    __syncthreads();
  }
  int seen = 0;  // survivors before this chunk: the first `post` of them stay
  for (int start = 0; start < k; start += kBlock) {
    const int i = start + int(threadIdx.x);
    const bool alive = i < k && sorted[i] != kNone;
    const Count c = block_count(alive);
    if (alive && seen + c.before >= post) sorted[i] = kNone;
    seen += c.total;
  }
}

// One block per image: the top `post` survivors of its levels by (objectness descending, then
// position in sorted_all: level, then rank), sorted in fin[0, M2), and the outputs.
__global__ void __launch_bounds__(kBlock)
    proposal_merge_kernel(const float* __restrict__ objectness, int A, LevelBounds lb, int L, int K, int M, int post,
                          int M2, const uint64_t* __restrict__ sorted_all, const float* __restrict__ cand_all,
                          uint64_t* __restrict__ fin_all, float* __restrict__ boxes, float* __restrict__ scores,
                          int32_t* __restrict__ count_out) {
  const int img = int(blockIdx.x);
  const int count = L * M;
  const uint64_t* sorted = sorted_all + size_t(img) * count;
  uint64_t* fin = fin_all + size_t(img) * M2;
  const int kk = select_survivors(sorted, count, post, fin, M2);
  for (int r = int(threadIdx.x); r < post; r += kBlock) {
    float* ob = boxes + (size_t(img) * post + r) * 4;
    const size_t o = size_t(img) * post + r;
    if (r < kk) {
      const int i = int(uint32_t(fin[r]));
      const int l = i / M, slot = i % M;
      const float* b = cand_all + ((size_t(img) * L + l) * K + slot) * 4;
      ob[0] = b[0], ob[1] = b[1], ob[2] = b[2], ob[3] = b[3];
      scores[o] = objectness[size_t(img) * A + lb.first[l] + int(uint32_t(sorted[i]))];
    } else {
      ob[0] = ob[1] = ob[2] = ob[3] = 0.0f;
      scores[o] = 0.0f;
    }
  }
  if (threadIdx.x == 0) count_out[img] = kk;
}

struct ProposalLayout {
  int K, M, M2;  // candidates per level (at most), its sort size (a power of two), the final sort size
};
ProposalLayout proposal_layout(int num_anchors, int levels, int pre_nms_topk, int post_nms_topk) {
  ProposalLayout p;
  const int A = num_anchors > 0 ? num_anchors : 0;
  p.K = pre_nms_topk < 0 ? 0 : (pre_nms_topk > A ? A : pre_nms_topk);
  p.M = int(pow2_at_least(size_t(p.K)));
  const size_t all = size_t(levels > 0 ? levels : 0) * size_t(p.M), post = size_t(post_nms_topk > 0 ? post_nms_topk : 0);
  p.M2 = int(pow2_at_least(post < all ? post : all));
  return p;
}

constexpr double kRpnBeta = 1.0 / 9.0;

// One block per image: its samples' loss terms summed by a fixed tree, their gradients added into
// the zeroed buffers (one add each unless an anchor is sampled twice), the image's two parts.
__global__ void __launch_bounds__(kBlock)
    rpn_loss_kernel(const float* __restrict__ objectness, const float* __restrict__ deltas, int A,
                    const int32_t* __restrict__ sample_index, const int32_t* __restrict__ sample_first,
                    const int32_t* __restrict__ positive_first, const float* __restrict__ target_deltas,
                    float grad_scale, float* __restrict__ dobjectness, float* __restrict__ ddeltas,
                    double* __restrict__ img_cls, double* __restrict__ img_box, int* __restrict__ bad) {
  const int img = int(blockIdx.x);
  const int s0 = sample_first[img], count = sample_first[img + 1] - s0;
  const int p0 = positive_first[img], positives = positive_first[img + 1] - p0;
  const bool consistent = count >= 0 && positives >= 0 && positives <= count;
  const double g = count > 0 ? double(grad_scale) / count : 0.0;
  double cls = 0.0, box = 0.0;
  for (int k = int(threadIdx.x); consistent && k < count; k += kBlock) {
    const int a = sample_index[s0 + k];
    if (a < 0 || a >= A) {
      *bad = 1;
      continue;
    }
    const size_t e = size_t(img) * A + a;
    const double z = objectness[e], y = k < positives ? 1.0 : 0.0;
    cls += fmax(z, 0.0) - y * z + log1p(exp(-fabs(z)));
    const double sig = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    atomicAdd(dobjectness + e, float((sig - y) * g));
    if (k < positives)
      for (int j = 0; j < 4; ++j) {
        const double x = double(deltas[e * 4 + j]) - double(target_deltas[(size_t(p0) + k) * 4 + j]);
        box += smooth_l1(x, kRpnBeta);
        atomicAdd(ddeltas + e * 4 + j, float(smooth_l1_grad(x, kRpnBeta) * g));
      }
  }
  cls = block_sum(cls);
  box = block_sum(box);
  if (threadIdx.x == 0) {
    if (!consistent) *bad = 1;
    img_cls[img] = count > 0 ? cls / count : 0.0;
    img_box[img] = count > 0 ? box / count : 0.0;
  }
}

// One block per image: its rows' cross-entropy (softmax_xent's arithmetic without label smoothing)
// and gradient, its foreground's smooth-L1 (beta 1) into the zeroed dbox rows, the image's parts.
__global__ void __launch_bounds__(kBlock)
    box_loss_kernel(const float* __restrict__ cls_logits, const float* __restrict__ box_deltas, int C,
                    const int32_t* __restrict__ labels, const int32_t* __restrict__ row_first,
                    const int32_t* __restrict__ fg_first, const float* __restrict__ target_deltas, float grad_scale,
                    float* __restrict__ dcls, float* __restrict__ dbox, double* __restrict__ img_cls,
                    double* __restrict__ img_box, int* __restrict__ bad) {
  const int img = int(blockIdx.x), row = C * 4;
  const int r0 = row_first[img], k = row_first[img + 1] - r0;
  const int t0 = fg_first[img], fg = fg_first[img + 1] - t0;
  const bool consistent = k >= 0 && fg >= 0 && fg <= k;
  const int rows = consistent ? k : 0;
  float* db = dbox + size_t(r0) * row;
  for (size_t e = threadIdx.x; e < size_t(rows) * row; e += kBlock) db[e] = 0.0f;
  __syncthreads();
  const float row_scale = rows > 0 ? grad_scale / float(rows) : 0.0f;  // the CPU's float division
  const double g = rows > 0 ? double(grad_scale) / rows : 0.0;
  double cls = 0.0, box = 0.0;
  for (int r = int(threadIdx.x); r < rows; r += kBlock) {
    const int label = labels[r0 + r];
    if (label < 0 || label >= C || (r < fg && label < 1)) {
      *bad = 1;
      continue;
    }
    if (cls_logits) {
      const float* z = cls_logits + size_t(r0 + r) * C;
      int arg = 0;
      for (int j = 1; j < C; ++j)
        if (z[j] > z[arg]) arg = j;
      const double zmax = z[arg];
      double sum = 0.0;
      for (int j = 0; j < C; ++j) sum += exp(double(z[j]) - zmax);
      const double log_sum = log(sum) + zmax;
      cls += log_sum - double(z[label]);
      float* gz = dcls + size_t(r0 + r) * C;
      for (int j = 0; j < C; ++j)
        gz[j] = float((exp(double(z[j]) - log_sum) - (j == label ? 1.0 : 0.0)) * double(row_scale));
    }
    if (r < fg) {
      const size_t at = size_t(r) * row + size_t(label) * 4;
      const float* t = target_deltas + (size_t(t0) + r) * 4;
      for (int j = 0; j < 4; ++j) {
        const double x = double(box_deltas[size_t(r0) * row + at + j]) - double(t[j]);
        box += smooth_l1(x, 1.0);
        db[at + j] = float(smooth_l1_grad(x, 1.0) * g);
      }
    }
  }
  cls = block_sum(cls);
  box = block_sum(box);
  if (threadIdx.x == 0) {
    if (!consistent) *bad = 1;
    img_cls[img] = rows > 0 ? cls / rows : 0.0;
    img_box[img] = rows > 0 ? box / rows : 0.0;
  }
}

// One block per image: sigmoid_bce's terms (kernels/cuda/ncf_ops.cu) of its rows' label channels,
// their gradients into the zeroed dlogits, the image's mean into img_loss (img_zero: the second part
// of the per-image sums, none here).
__global__ void __launch_bounds__(kBlock)
    mask_loss_kernel(const float* __restrict__ logits, int pixels, int C, const int32_t* __restrict__ labels,
                     const uint8_t* __restrict__ targets, const int32_t* __restrict__ row_first, float grad_scale,
                     float* __restrict__ dlogits, double* __restrict__ img_loss, double* __restrict__ img_zero,
                     int* __restrict__ bad) {
  const int img = int(blockIdx.x);
  const int r0 = row_first[img], k = row_first[img + 1] - r0;
  const size_t count = k > 0 ? size_t(k) * pixels : 0;
  const float scale = count > 0 ? grad_scale / float(count) : 0.0f;  // the CPU's float division
  double sum = 0.0;
  for (size_t i = threadIdx.x; i < count; i += kBlock) {
    const int r = int(i / size_t(pixels));
    const int label = labels[r0 + r];
    if (label < 0 || label >= C) {
      *bad = 1;
      continue;
    }
    const size_t e = size_t(r0) * pixels + i, at = e * C + size_t(label);
    const float z = logits[at], y = targets[e] ? 1.0f : 0.0f;
    const float ez = expf(-fabsf(z));  // in (0, 1]: never overflows
    sum += double(fmaxf(z, 0.0f) - y * z + log1pf(ez));
    const float s = z >= 0.0f ? 1.0f / (1.0f + ez) : ez / (1.0f + ez);
    dlogits[at] = (s - y) * scale;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    if (k < 0) *bad = 1;
    img_loss[img] = count > 0 ? sum / double(count) : 0.0;
    img_zero[img] = 0.0;
  }
}

// The images' parts added in image order, as the CPU does, onto the caller's loss: each part to
// loss_parts [2], or both to loss_sum. An input a kernel flagged (an index or label out of range,
// inconsistent bounds) makes the loss NaN: the device cannot stop the host, and the trainer stops a
// run whose loss is not finite (the CPU op throws instead).
__global__ void image_parts_total_kernel(int n, const double* __restrict__ img_cls, const double* __restrict__ img_box,
                                         const int* __restrict__ bad, double* __restrict__ loss_parts,
                                         double* __restrict__ loss_sum) {
  double c = 0.0, b = 0.0;
  for (int i = 0; i < n; ++i) c += img_cls[i], b += img_box[i];
  if (*bad) c = b = CUDART_NAN;
  if (loss_parts) {
    loss_parts[0] += c;
    loss_parts[1] += b;
  }
  if (loss_sum) *loss_sum += c + b;
}

// =============================== Mask R-CNN's RoI sampling ===============================

// rng_below of core/rng.h: the high word of the 64x64-bit product.
__device__ __forceinline__ uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
  return __umul64hi(rng_u64(seed, stream, counter), n);
}
// draw_without_replacement of kernels/cpu/detection.cpp, by one thread.
__device__ int draw_without_replacement(int32_t* c, int n, int k, uint64_t seed, uint64_t stream, uint64_t first) {
  k = k < n ? k : n;
  k = k > 0 ? k : 0;
  for (int i = 0; i < k; ++i) {
    const int j = i + int(rng_below(seed, stream, first + uint64_t(i), uint64_t(n - i)));
    const int32_t t = c[i];
    c[i] = c[j];
    c[j] = t;
  }
  return k;
}
// rcnn_encode_box of the CPU with weights (10, 10, 5, 5), each double operation rounded on its own.
__device__ __forceinline__ void encode_roi(const float* ref, const float* t, float* d) {
  const double wa = __dsub_rn(double(ref[2]), double(ref[0])), ha = __dsub_rn(double(ref[3]), double(ref[1]));
  const double wb = __dsub_rn(double(t[2]), double(t[0])), hb = __dsub_rn(double(t[3]), double(t[1]));
  const double cax = __dadd_rn(double(ref[0]), 0.5 * wa), cay = __dadd_rn(double(ref[1]), 0.5 * ha);
  const double cbx = __dadd_rn(double(t[0]), 0.5 * wb), cby = __dadd_rn(double(t[1]), 0.5 * hb);
  d[0] = float(__ddiv_rn(__dmul_rn(10.0, __dsub_rn(cbx, cax)), wa));
  d[1] = float(__ddiv_rn(__dmul_rn(10.0, __dsub_rn(cby, cay)), ha));
  d[2] = float(__dmul_rn(5.0, log(__ddiv_rn(wb, wa))));
  d[3] = float(__dmul_rn(5.0, log(__ddiv_rn(hb, ha))));
}

// An image's candidate c: proposal c, or past the proposals its gt box c - P.
__device__ __forceinline__ const float* roi_candidate(const float* proposal_boxes, int img, int max_proposals,
                                                      int P, const float* gts, int c) {
  return c < P ? proposal_boxes + (size_t(img) * max_proposals + size_t(c)) * 4 : gts + size_t(c - P) * 4;
}

// One block per image: each candidate's best gt (a thread per candidate), the foreground and the
// background lists in candidate order (block_count), then one thread draws both samples. taken [n, 2]:
// the foreground and background drawn; -1, 0 for an image outside the contract.
__global__ void __launch_bounds__(kBlock)
    roi_sample_kernel(RoiSampling s, int max_fg, const float* __restrict__ proposal_boxes,
                      const int32_t* __restrict__ proposal_count, int max_proposals,
                      const float* __restrict__ gt_boxes, const int32_t* __restrict__ gt_labels,
                      const int32_t* __restrict__ gt_first, int max_gts, int C, int32_t* __restrict__ match,
                      int32_t* __restrict__ fg, int32_t* __restrict__ bg, int32_t* __restrict__ taken) {
  __shared__ int s_bad;
  const int img = int(blockIdx.x);
  const int P = proposal_count[img], g0 = gt_first[img], G = gt_first[img + 1] - g0;
  if (threadIdx.x == 0) s_bad = P < 0 || P > max_proposals || G < 0 || G > max_gts;
  __syncthreads();
  if (!s_bad)
    for (int g = int(threadIdx.x); g < G; g += kBlock)
      if (gt_labels[g0 + g] < 1) s_bad = 1;
  __syncthreads();
  if (s_bad) {
    if (threadIdx.x == 0) taken[2 * img] = -1, taken[2 * img + 1] = 0;
    return;
  }
  const float* gts = gt_boxes + size_t(g0) * 4;
  int32_t* my_match = match + size_t(img) * C;
  int32_t* my_fg = fg + size_t(img) * C;
  int32_t* my_bg = bg + size_t(img) * C;
  int nfg = 0, nbg = 0;
  for (int start = 0; start < P + G; start += kBlock) {
    const int c = start + int(threadIdx.x);
    bool is_fg = false, is_bg = false;
    if (c < P + G) {
      const Box4 box = load_box(roi_candidate(proposal_boxes, img, max_proposals, P, gts, c));
      float best = 0.0f;
      int gt = -1;
      for (int g = 0; g < G; ++g) {
        const float v = box_iou(box, load_box(gts + size_t(g) * 4));
        if (gt < 0 || v > best) best = v, gt = g;
      }
      is_fg = gt >= 0 && best >= s.fg_iou;
      is_bg = !is_fg && best >= s.bg_iou_lo && best < s.bg_iou_hi;
      my_match[c] = is_fg ? gt : -1;
    }
    const Count a = block_count(is_fg);
    if (is_fg) my_fg[nfg + a.before] = c;
    const Count b = block_count(is_bg);
    if (is_bg) my_bg[nbg + b.before] = c;
    nfg += a.total;
    nbg += b.total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint64_t first = (s.key + uint64_t(img)) * kSampleKeyCounters;
    const int nf = draw_without_replacement(my_fg, nfg, max_fg, s.seed, s.stream, first);
    const int nb = draw_without_replacement(my_bg, nbg, s.batch - nf, s.seed, s.stream,
                                            first + kSampleNegativeCounters);
    taken[2 * img] = nf;
    taken[2 * img + 1] = nb;
  }
}

// The images' row and foreground bounds, in image order (one thread); an image outside the contract
// gets one row (labelled -1 below) and no foreground.
__global__ void roi_bounds_kernel(int n, int batch, const int32_t* __restrict__ taken, int32_t* __restrict__ row_first,
                                  int32_t* __restrict__ fg_first) {
  row_first[0] = fg_first[0] = 0;
  for (int i = 0; i < n; ++i) {
    const bool bad = taken[2 * i] < 0;
    row_first[i + 1] = row_first[i] + (bad ? (batch > 0 ? 1 : 0) : taken[2 * i] + taken[2 * i + 1]);
    fg_first[i + 1] = fg_first[i] + (bad ? 0 : taken[2 * i]);
  }
}

// One block per image: its rows, a thread per row.
__global__ void __launch_bounds__(kBlock)
    roi_rows_kernel(const float* __restrict__ proposal_boxes, const int32_t* __restrict__ proposal_count,
                    int max_proposals, const float* __restrict__ gt_boxes, const int32_t* __restrict__ gt_labels,
                    const int32_t* __restrict__ gt_first, int C, const int32_t* __restrict__ match,
                    const int32_t* __restrict__ fg, const int32_t* __restrict__ bg, const int32_t* __restrict__ taken,
                    const int32_t* __restrict__ row_first, const int32_t* __restrict__ fg_first,
                    float* __restrict__ rois, int32_t* __restrict__ labels, int32_t* __restrict__ matched,
                    float* __restrict__ target_deltas) {
  const int img = int(blockIdx.x);
  const int r0 = row_first[img], t0 = fg_first[img];
  if (taken[2 * img] < 0) {
    if (threadIdx.x == 0 && row_first[img + 1] > r0) {
      rois[size_t(r0) * 5] = float(img);
      labels[r0] = -1;
    }
    return;
  }
  const int P = proposal_count[img], g0 = gt_first[img], nf = taken[2 * img], nb = taken[2 * img + 1];
  const float* gts = gt_boxes + size_t(g0) * 4;
  for (int r = int(threadIdx.x); r < nf + nb; r += kBlock) {
    const int c = r < nf ? fg[size_t(img) * C + r] : bg[size_t(img) * C + (r - nf)];
    const float* box = roi_candidate(proposal_boxes, img, max_proposals, P, gts, c);
    float* row = rois + size_t(r0 + r) * 5;
    row[0] = float(img);
    for (int j = 0; j < 4; ++j) row[1 + j] = box[j];
    if (r < nf) {
      const int gt = match[size_t(img) * C + c];
      labels[r0 + r] = gt_labels[g0 + gt];
      matched[r0 + r] = gt;
      encode_roi(box, gts + size_t(gt) * 4, target_deltas + size_t(t0 + r) * 4);
    }
  }
}

// Scratch of a loss summed per image: each image's two parts and an error flag (zeroed).
struct ImageParts {
  double *cls, *box;
  int* bad;
};
size_t image_parts_floats(int n) {
  const size_t N = size_t(n > 0 ? n : 0);
  return 2 * floats_for_bytes(N * sizeof(double)) + floats_for_bytes(sizeof(int));
}
ImageParts take_image_parts(Arena& arena, int n) {
  ImageParts p{take<double>(arena, size_t(n)), take<double>(arena, size_t(n)), take<int>(arena, 1)};
  CUDA_CHECK(cudaMemsetAsync(p.bad, 0, sizeof(int), stream()));
  return p;
}
void add_image_parts(const ImageParts& p, int n, double* loss_parts, double* loss_sum) {
  if (!loss_parts && !loss_sum) return;
  image_parts_total_kernel<<<1, 1, 0, stream()>>>(n, p.cls, p.box, p.bad, loss_parts, loss_sum);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// =============================== entry points ===============================

size_t ssd_assign_scratch_floats(int /*num_priors*/, int /*max_gts_per_batch*/) { return 0; }

void ssd_assign_targets(const float* priors, int num_priors, const float* gt_boxes, const int32_t* gt_labels,
                        const int32_t* gt_first, int n, float iou_threshold, float var_center, float var_size,
                        int32_t* labels_out, float* loc_targets, Arena& /*arena*/) {
  const size_t total = size_t(n) * size_t(num_priors);
  if (n <= 0 || num_priors <= 0) return;
  assign_best_gt_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(priors, num_priors, gt_boxes, gt_first, n,
                                                                      labels_out, loc_targets);
  CUDA_CHECK_LAUNCH();
  assign_force_kernel<<<unsigned(n), kBlock, 0, stream()>>>(priors, num_priors, gt_boxes, gt_first, labels_out,
                                                            loc_targets);
  CUDA_CHECK_LAUNCH();
  assign_encode_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(priors, num_priors, gt_boxes, gt_labels, n,
                                                                     iou_threshold, double(var_center),
                                                                     double(var_size), labels_out, loc_targets);
  CUDA_CHECK_LAUNCH();
}

// lse and term [n*P] doubles, rank [n*P], used [n*P] bytes, image losses [n] doubles and positives
// [n] ints, the two totals.
size_t ssd_loss_scratch_floats(int n, int num_priors) {
  const size_t N = size_t(n > 0 ? n : 0), NP = N * size_t(num_priors > 0 ? num_priors : 0);
  return 2 * floats_for_bytes(NP * sizeof(double)) + floats_for_bytes(NP * sizeof(float)) + floats_for_bytes(NP) +
         floats_for_bytes(N * sizeof(double)) + floats_for_bytes(N * sizeof(int)) + floats_for_bytes(sizeof(double)) +
         floats_for_bytes(sizeof(int));
}

void ssd_multibox_loss(const float* conf, const float* loc, const int32_t* labels, const float* loc_targets, int n,
                       int num_priors, int classes, float neg_pos_ratio, float grad_scale, float* dconf, float* dloc,
                       double* loss_sum, int* num_pos, Arena& arena) {
  if (n <= 0 || num_priors <= 0) {
    if (num_pos) *num_pos = 0;
    return;
  }
  ArenaScope scope(arena);
  const int P = num_priors, C = classes;
  const size_t NP = size_t(n) * P;
  LossScratch s;
  s.lse = take<double>(arena, NP);
  s.term = take<double>(arena, NP);
  s.rank = take<float>(arena, NP);
  s.used = take<uint8_t>(arena, NP);
  s.img_loss = take<double>(arena, size_t(n));
  s.img_pos = take<int>(arena, size_t(n));
  s.total = take<double>(arena, 1);
  s.total_pos = take<int>(arena, 1);
  loss_prior_kernel<<<blocks_for(NP), kThreads, 0, stream()>>>(conf, loc, labels, loc_targets, n, P, C, s);
  CUDA_CHECK_LAUNCH();
  loss_mine_kernel<<<unsigned(n), kBlock, 0, stream()>>>(labels, P, neg_pos_ratio, s);
  CUDA_CHECK_LAUNCH();
  if (dconf) {
    loss_dconf_kernel<<<blocks_for(NP * C), kThreads, 0, stream()>>>(conf, labels, n, P, C, grad_scale, s, dconf);
    CUDA_CHECK_LAUNCH();
  }
  if (dloc) {
    loss_dloc_kernel<<<blocks_for(NP * 4), kThreads, 0, stream()>>>(loc, loc_targets, labels, n, P, grad_scale, s,
                                                                    dloc);
    CUDA_CHECK_LAUNCH();
  }
  loss_total_kernel<<<1, kBlock, 0, stream()>>>(n, s, loss_sum);
  CUDA_CHECK_LAUNCH();
  if (!num_pos) return;
  CUDA_CHECK(cudaMemcpyAsync(num_pos, s.total_pos, sizeof(int), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

// boxes [n,P,4], scores [n,C,P], per (image, class >= 1) sort slots [M], per image final slots [M2].
size_t ssd_detect_scratch_floats(int n, int num_priors, int classes, int pre_nms_topk) {
  const DetectLayout l = detect_layout(num_priors, classes, pre_nms_topk);
  const size_t N = size_t(n > 0 ? n : 0), P = size_t(num_priors > 0 ? num_priors : 0);
  const size_t C = size_t(classes > 0 ? classes : 0), C1 = C > 0 ? C - 1 : 0;
  return floats_for_bytes(N * P * 4 * sizeof(float)) + floats_for_bytes(N * C * P * sizeof(float)) +
         floats_for_bytes(N * C1 * size_t(l.M) * sizeof(uint64_t)) +
         floats_for_bytes(N * size_t(l.M2) * sizeof(uint64_t));
}

void ssd_detect(const float* conf, const float* loc, const float* priors, int n, int num_priors, int classes,
                float var_center, float var_size, float score_threshold, float nms_iou, int pre_nms_topk, int max_dets,
                float* det_boxes, float* det_scores, int32_t* det_classes, int32_t* det_count, Arena& arena) {
  if (n <= 0) return;
  const int D = max_dets > 0 ? max_dets : 0;
  const int P = num_priors > 0 ? num_priors : 0, C = classes;
  if (P == 0 || C < 2) {  // nothing to detect: zero outputs
    if (D > 0) {
      CUDA_CHECK(cudaMemsetAsync(det_boxes, 0, size_t(n) * D * 4 * sizeof(float), stream()));
      CUDA_CHECK(cudaMemsetAsync(det_scores, 0, size_t(n) * D * sizeof(float), stream()));
      CUDA_CHECK(cudaMemsetAsync(det_classes, 0, size_t(n) * D * sizeof(int32_t), stream()));
    }
    CUDA_CHECK(cudaMemsetAsync(det_count, 0, size_t(n) * sizeof(int32_t), stream()));
    return;
  }
  ArenaScope scope(arena);
  DetectLayout l = detect_layout(P, C, pre_nms_topk);
  const int M2 = int(pow2_at_least(size_t(D < (C - 1) * l.M ? D : (C - 1) * l.M)));
  float* boxes = take<float>(arena, size_t(n) * P * 4);
  float* scores = take<float>(arena, size_t(n) * C * P);
  uint64_t* sorted = take<uint64_t>(arena, size_t(n) * (C - 1) * l.M);
  uint64_t* fin = take<uint64_t>(arena, size_t(n) * M2);
  detect_prepare_kernel<<<blocks_for(size_t(n) * P), kThreads, 0, stream()>>>(
      conf, loc, priors, n, P, C, double(var_center), double(var_size), boxes, scores);
  CUDA_CHECK_LAUNCH();
  detect_class_kernel<<<unsigned(n * (C - 1)), kBlock, 0, stream()>>>(boxes, scores, P, C, score_threshold, nms_iou,
                                                                      l.K, l.M, sorted);
  CUDA_CHECK_LAUNCH();
  detect_final_kernel<<<unsigned(n), kBlock, 0, stream()>>>(boxes, sorted, P, C, l.M, D, M2, fin, det_boxes, det_scores,
                                                            det_classes, det_count);
  CUDA_CHECK_LAUNCH();
}

// The masks [n, words] (words = ceil(n / 64)) and the count.
size_t nms_scratch_floats(int n) {
  const size_t N = size_t(n > 0 ? n : 0), words = (N + kNmsBlock - 1) / kNmsBlock;
  return floats_for_bytes(N * words * sizeof(uint64_t)) + floats_for_bytes(sizeof(int));
}

int nms_sorted(const float* boxes, int n, float iou_threshold, int max_keep, int32_t* keep, Arena& arena) {
  if (n <= 0 || max_keep <= 0) return 0;
  ArenaScope scope(arena);
  const int words = (n + kNmsBlock - 1) / kNmsBlock;
  const size_t shared = size_t(words) * sizeof(uint64_t);
  if (shared > kMaxShared) fail(__FILE__, __LINE__, "nms_sorted", "too many boxes for one block's shared memory");
  uint64_t* mask = take<uint64_t>(arena, size_t(n) * words);
  int* count = take<int>(arena, 1);
  nms_mask_kernel<<<dim3(unsigned(words), unsigned(words)), kNmsBlock, 0, stream()>>>(boxes, n, words, iou_threshold,
                                                                                      mask);
  CUDA_CHECK_LAUNCH();
  nms_walk_kernel<<<1, 32, shared, stream()>>>(mask, n, words, max_keep, keep, count);
  CUDA_CHECK_LAUNCH();
  int host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof(int), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  return host;
}


// Per (image, level) sort slots [M] and candidate boxes [K, 4], per image final slots [M2].
size_t rpn_proposals_scratch_floats(int n, int num_anchors, int levels, int pre_nms_topk, int post_nms_topk) {
  const ProposalLayout p = proposal_layout(num_anchors, levels, pre_nms_topk, post_nms_topk);
  const size_t NL = size_t(n > 0 ? n : 0) * size_t(levels > 0 ? levels : 0);
  return floats_for_bytes(NL * size_t(p.M) * sizeof(uint64_t)) + floats_for_bytes(NL * size_t(p.K) * 4 * sizeof(float)) +
         floats_for_bytes(size_t(n > 0 ? n : 0) * size_t(p.M2) * sizeof(uint64_t));
}

void rpn_proposals(const float* objectness, const float* deltas, const float* anchors, int n, int num_anchors,
                   const int32_t* level_first, int levels, int img_h, int img_w, int pre_nms_topk, int post_nms_topk,
                   float nms_iou, float min_size, float* boxes, float* scores, int32_t* count, Arena& arena) {
  if (n <= 0) return;
  if (levels < 1 || levels > kMaxLevels || level_first[0] != 0 || level_first[levels] != num_anchors)
    fail(__FILE__, __LINE__, "rpn_proposals", "level bounds must run from 0 to the anchor count, 1 to 8 levels");
  LevelBounds lb{};
  for (int l = 0; l <= levels; ++l) {
    if (l > 0 && level_first[l] < level_first[l - 1]) fail(__FILE__, __LINE__, "rpn_proposals", "bad level bounds");
    lb.first[l] = level_first[l];
  }
  const int post = post_nms_topk > 0 ? post_nms_topk : 0;
  const ProposalLayout p = proposal_layout(num_anchors, levels, pre_nms_topk, post);
  if (p.K == 0 || post == 0) {  // nothing proposed: zero outputs
    if (post > 0) {
      CUDA_CHECK(cudaMemsetAsync(boxes, 0, size_t(n) * post * 4 * sizeof(float), stream()));
      CUDA_CHECK(cudaMemsetAsync(scores, 0, size_t(n) * post * sizeof(float), stream()));
    }
    CUDA_CHECK(cudaMemsetAsync(count, 0, size_t(n) * sizeof(int32_t), stream()));
    return;
  }
  ArenaScope scope(arena);
  uint64_t* sorted = take<uint64_t>(arena, size_t(n) * levels * p.M);
  float* cand = take<float>(arena, size_t(n) * levels * p.K * 4);
  uint64_t* fin = take<uint64_t>(arena, size_t(n) * p.M2);
  const double size_clip = std::log(1000.0 / 16.0);  // the CPU's bound, computed by the same function
  proposal_level_kernel<<<unsigned(n * levels), kBlock, 0, stream()>>>(
      objectness, deltas, anchors, num_anchors, lb, levels, float(img_h), float(img_w), p.K, p.M, post, nms_iou,
      min_size, size_clip, sorted, cand);
  CUDA_CHECK_LAUNCH();
  proposal_merge_kernel<<<unsigned(n), kBlock, 0, stream()>>>(objectness, num_anchors, lb, levels, p.K, p.M, post,
                                                              p.M2, sorted, cand, fin, boxes, scores, count);
  CUDA_CHECK_LAUNCH();
}

size_t rpn_loss_scratch_floats(int n) { return image_parts_floats(n); }

void rpn_loss_batch(const float* objectness, const float* deltas, int n, int num_anchors,
                    const int32_t* sample_index, const int32_t* sample_first, const int32_t* positive_first,
                    const float* target_deltas, float grad_scale, float* dobjectness, float* ddeltas,
                    double* loss_parts, Arena& arena) {
  if (n <= 0 || num_anchors < 0) return;
  const size_t NA = size_t(n) * size_t(num_anchors);
  CUDA_CHECK(cudaMemsetAsync(dobjectness, 0, NA * sizeof(float), stream()));
  CUDA_CHECK(cudaMemsetAsync(ddeltas, 0, NA * 4 * sizeof(float), stream()));
  ArenaScope scope(arena);
  const ImageParts parts = take_image_parts(arena, n);
  rpn_loss_kernel<<<unsigned(n), kBlock, 0, stream()>>>(objectness, deltas, num_anchors, sample_index, sample_first,
                                                        positive_first, target_deltas, grad_scale, dobjectness,
                                                        ddeltas, parts.cls, parts.box, parts.bad);
  CUDA_CHECK_LAUNCH();
  add_image_parts(parts, n, loss_parts, nullptr);
}

size_t rcnn_mask_loss_scratch_floats(int n, int /*rows*/, int /*pixels*/) { return image_parts_floats(n); }

void rcnn_mask_loss(const float* logits, int n, int rows, int pixels, int classes, const int32_t* labels,
                    const uint8_t* targets, const int32_t* row_first, float grad_scale, float* dlogits,
                    double* loss_sum, Arena& arena) {
  if (n < 0 || rows < 0 || pixels < 0 || classes < 1) fail(__FILE__, __LINE__, "rcnn_mask_loss", "bad sizes");
  const size_t total = size_t(rows) * size_t(pixels) * size_t(classes);
  if (total > 0) CUDA_CHECK(cudaMemsetAsync(dlogits, 0, total * sizeof(float), stream()));
  if (n == 0) return;
  ArenaScope scope(arena);
  const ImageParts parts = take_image_parts(arena, n);
  mask_loss_kernel<<<unsigned(n), kBlock, 0, stream()>>>(logits, pixels, classes, labels, targets, row_first,
                                                         grad_scale, dlogits, parts.cls, parts.box, parts.bad);
  CUDA_CHECK_LAUNCH();
  add_image_parts(parts, n, nullptr, loss_sum);
}

size_t rcnn_box_loss_scratch_floats(int n) { return image_parts_floats(n); }

void rcnn_box_loss(const float* cls_logits, const float* box_deltas, int n, int classes, const int32_t* labels,
                   const int32_t* row_first, const int32_t* fg_first, const float* target_deltas, float grad_scale,
                   float* dcls, float* dbox, double* loss_parts, Arena& arena) {
  if (classes < 2) fail(__FILE__, __LINE__, "rcnn_box_loss", "need a background and at least one class");
  if ((cls_logits == nullptr) != (dcls == nullptr))
    fail(__FILE__, __LINE__, "rcnn_box_loss", "logits and their gradient go together");
  if (n <= 0) return;
  ArenaScope scope(arena);
  const ImageParts parts = take_image_parts(arena, n);
  box_loss_kernel<<<unsigned(n), kBlock, 0, stream()>>>(cls_logits, box_deltas, classes, labels, row_first, fg_first,
                                                        target_deltas, grad_scale, dcls, dbox, parts.cls, parts.box,
                                                        parts.bad);
  CUDA_CHECK_LAUNCH();
  add_image_parts(parts, n, loss_parts, nullptr);
}

size_t rcnn_sample_rois_scratch_floats(int n, int max_proposals, int max_gts) {
  const size_t N = size_t(n > 0 ? n : 0),
               C = size_t(max_proposals > 0 ? max_proposals : 0) + size_t(max_gts > 0 ? max_gts : 0);
  return 3 * floats_for_bytes(N * C * sizeof(int32_t)) + floats_for_bytes(2 * N * sizeof(int32_t));
}

void rcnn_sample_rois(const RoiSampling& s, const float* proposal_boxes, const int32_t* proposal_count,
                      int max_proposals, const float* gt_boxes, const int32_t* gt_labels, const int32_t* gt_first,
                      int n, int max_gts, int max_rows, float* rois, int32_t* row_first, int32_t* fg_first,
                      int32_t* labels, int32_t* matched, float* target_deltas, Arena& arena) {
  if (n < 0 || max_proposals < 0 || max_gts < 0) fail(__FILE__, __LINE__, "rcnn_sample_rois", "bad sizes");
  if (s.batch < 0 || uint64_t(s.batch) > kSampleNegativeCounters)
    fail(__FILE__, __LINE__, "rcnn_sample_rois", "sampling batch outside [0, 2^19]");
  if (!(s.pos_fraction >= 0.0f && s.pos_fraction <= 1.0f))
    fail(__FILE__, __LINE__, "rcnn_sample_rois", "pos_fraction outside [0, 1]");
  if (s.key + uint64_t(n) > kSampleMaxKey)
    fail(__FILE__, __LINE__, "rcnn_sample_rois", "sampling key must stay below 2^44");
  if (int64_t(max_rows) < int64_t(n) * s.batch)
    fail(__FILE__, __LINE__, "rcnn_sample_rois", "max_rows below n * batch");
  const size_t R = size_t(max_rows > 0 ? max_rows : 0);
  CUDA_CHECK(cudaMemsetAsync(rois, 0, R * 5 * sizeof(float), stream()));
  CUDA_CHECK(cudaMemsetAsync(labels, 0, R * sizeof(int32_t), stream()));
  CUDA_CHECK(cudaMemsetAsync(matched, 0xff, R * sizeof(int32_t), stream()));
  CUDA_CHECK(cudaMemsetAsync(target_deltas, 0, R * 4 * sizeof(float), stream()));
  if (n == 0) {
    CUDA_CHECK(cudaMemsetAsync(row_first, 0, sizeof(int32_t), stream()));
    CUDA_CHECK(cudaMemsetAsync(fg_first, 0, sizeof(int32_t), stream()));
    return;
  }
  ArenaScope scope(arena);
  const int C = max_proposals + max_gts;
  int32_t* match = take<int32_t>(arena, size_t(n) * C);
  int32_t* fg = take<int32_t>(arena, size_t(n) * C);
  int32_t* bg = take<int32_t>(arena, size_t(n) * C);
  int32_t* taken = take<int32_t>(arena, 2 * size_t(n));
  const int max_fg = sample_max_positives(s.batch, s.pos_fraction);
  roi_sample_kernel<<<unsigned(n), kBlock, 0, stream()>>>(s, max_fg, proposal_boxes, proposal_count, max_proposals,
                                                          gt_boxes, gt_labels, gt_first, max_gts, C, match, fg, bg,
                                                          taken);
  CUDA_CHECK_LAUNCH();
  roi_bounds_kernel<<<1, 1, 0, stream()>>>(n, s.batch, taken, row_first, fg_first);
  CUDA_CHECK_LAUNCH();
  roi_rows_kernel<<<unsigned(n), kBlock, 0, stream()>>>(proposal_boxes, proposal_count, max_proposals, gt_boxes,
                                                        gt_labels, gt_first, C, match, fg, bg, taken, row_first,
                                                        fg_first, rois, labels, matched, target_deltas);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
