// Mask R-CNN's host-side box logic (src/workloads/maskrcnn/rcnn_boxes.h) on small scenes built by
// hand: every expected value is worked out in the comment beside it (IoUs as intersection / union of
// the integer-cornered boxes, softmax from logits chosen as logs of simple ratios), and the two
// losses are checked against central differences of themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "../kernels/grad_check.h"
#include "core/arena.h"
#include "core/rng.h"
#include "workloads/maskrcnn/rcnn_boxes.h"

using namespace mlpd;

namespace {

using Box = std::vector<float>;

std::vector<float> flat(const std::vector<Box>& boxes) {
  std::vector<float> v;
  for (const Box& b : boxes) v.insert(v.end(), b.begin(), b.end());
  return v;
}

Box box_at(const std::vector<float>& boxes, int i) { return Box(boxes.begin() + i * 4, boxes.begin() + i * 4 + 4); }

void expect_box_near(const Box& expected, const Box& actual, float tol, const char* what) {
  ASSERT_EQ(actual.size(), 4u) << what;
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(expected[j], actual[j], tol) << what << " coordinate " << j;
}

Box encoded(const Box& ref, const Box& target, const BoxWeights& w) {
  Box d(4);
  encode_box(ref.data(), target.data(), w, d.data());
  return d;
}

// The RPN scene of a 64 x 64 image: gt A = (10,10,30,30), gt B = (44,44,64,64), and these anchors.
constexpr int kImg = 64;
const std::vector<Box> kRpnGt{{10, 10, 30, 30}, {44, 44, 64, 64}};
std::vector<Box> rpn_anchors() {
  std::vector<Box> a{
      {10, 10, 30, 30},   // 0: IoU(A) = 1                                   -> positive (A)
      {12, 10, 32, 30},   // 1: IoU(A) = 18*20 / (400+400-360) = 0.818        -> positive (A)
      {44, 34, 64, 64},   // 2: IoU(B) = 400 / 600 = 0.667 < 0.7, B's best visible anchor -> positive (B)
      {46, 44, 66, 64},   // 3: IoU(B) = 360 / 440 = 0.818 but x2 = 66 > 64 straddles -> ignored
      {10, 10, 30, 50},   // 4: IoU(A) = 400 / 800 = 0.5, between 0.3 and 0.7 -> ignored
      {-2, 10, 18, 30},   // 5: IoU(A) = 160 / 640 = 0.25 but x1 = -2 straddles -> ignored
      {20, 20, 40, 40},   // 6: IoU(A) = 100 / 700 = 0.143, IoU(B) = 0         -> negative
  };
  for (int x = 0; x <= 56; x += 2) a.push_back({float(x), 0, float(x + 4), 4});  // 7..35: IoU 0 -> negative
  return a;
}
const std::set<int> kRpnPositives{0, 1, 2};
const std::set<int> kRpnIgnored{3, 4, 5};

RpnSample sample_scene(const RpnTargetSpec& spec, uint64_t seed, uint64_t stream, uint64_t key) {
  const std::vector<float> anchors = flat(rpn_anchors()), gt = flat(kRpnGt);
  return sample_rpn_targets(spec, anchors.data(), static_cast<int>(anchors.size() / 4), gt.data(), 2, kImg, kImg,
                            seed, stream, key);
}

// The RoI scene of a 100 x 100 image: G0 = (10,10,50,50) class 3, G1 = (60,60,90,90) class 1.
const std::vector<Box> kRoiGt{{10, 10, 50, 50}, {60, 60, 90, 90}};
const std::vector<int32_t> kRoiGtLabels{3, 1};
Proposals roi_proposals() {
  Proposals p;
  p.boxes = flat({
      {10, 10, 50, 50},  // 0: IoU(G0) = 1                                   -> fg, G0
      {14, 10, 54, 50},  // 1: IoU(G0) = 36*40 / (3200-1440) = 0.818          -> fg, G0
      {60, 60, 90, 100}, // 2: IoU(G1) = 900 / 1200 = 0.75                    -> fg, G1
      {30, 10, 70, 50},  // 3: IoU(G0) = 20*40 / (3200-800) = 0.333, IoU(G1) = 0 -> bg
      {0, 0, 5, 5},      // 4: IoU 0                                          -> bg (bg_iou_lo = 0)
      {10, 10, 50, 90},  // 5: IoU(G0) = 1600 / 3200 = 0.5 exactly: fg_iou is inclusive -> fg, G0
  });
  p.scores = {6, 5, 4, 3, 2, 1};
  return p;
}
RoiSample sample_roi_scene(const RoiSampleSpec& spec, uint64_t key = 7) {
  const std::vector<float> gt = flat(kRoiGt);
  return sample_rois(spec, roi_proposals(), gt.data(), kRoiGtLabels.data(), 2, 42, 9, key);
}

}  // namespace

// ---- anchors

TEST(RcnnAnchors, CountOrderShapesAndAHandBox) {
  AnchorSpec spec;
  spec.stride = 8;
  spec.sizes = {16, 32};
  spec.ratios = {0.5f, 1.0f, 2.0f};
  const int A = spec.per_cell(), H = 2, W = 3;
  ASSERT_EQ(A, 6);
  const std::vector<float> a = make_anchors(spec, H, W);
  ASSERT_EQ(a.size(), size_t(H * W * A * 4));
  // Order (y, x, a) with a = ratio * sizes + size: cell (y=1, x=2) is centred at (20, 12); a = 3 is
  // ratio 1, size 32: the 32 x 32 box (4, -4, 36, 28).
  expect_box_near({4, -4, 36, 28}, box_at(a, (1 * W + 2) * A + 3), 1e-5f, "cell (1,2) anchor 3");
  // Cell (0,0), a = 0: ratio 0.5, size 16: w = 16/sqrt(0.5) = 22.627417, h = 16*sqrt(0.5) = 11.313708
  // around (4, 4).
  expect_box_near({-7.3137085f, -1.6568542f, 15.3137085f, 9.6568542f}, box_at(a, 0), 1e-5f, "cell (0,0) anchor 0");
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int k = 0; k < A; ++k) {
        const Box b = box_at(a, (y * W + x) * A + k);
        const float w = b[2] - b[0], h = b[3] - b[1];
        const float ratio = spec.ratios[k / 2], size = spec.sizes[k % 2];
        EXPECT_NEAR(h / w, ratio, 1e-5f) << y << "," << x << "," << k;
        EXPECT_NEAR(w * h, size * size, 1e-3f) << y << "," << x << "," << k;
        EXPECT_NEAR(0.5f * (b[0] + b[2]), (x + 0.5f) * 8, 1e-5f);
        EXPECT_NEAR(0.5f * (b[1] + b[3]), (y + 0.5f) * 8, 1e-5f);
      }
}

// ---- box coder, IoU, clipping

TEST(RcnnBoxCoder, EncodeHandValue) {
  // ref (0,0,10,20): w 10, h 20, centre (5,10); target (5,10,25,30): w 20, h 20, centre (15,20).
  // d = ((15-5)/10, (20-10)/20, log(20/10), log(20/20)) = (1, 0.5, 0.693147, 0); RoI weights (10,10,5,5)
  // multiply that into (10, 5, 3.465736, 0).
  expect_box_near({1, 0.5f, 0.6931472f, 0}, encoded({0, 0, 10, 20}, {5, 10, 25, 30}, kRpnBoxWeights), 1e-6f, "rpn");
  expect_box_near({10, 5, 3.465736f, 0}, encoded({0, 0, 10, 20}, {5, 10, 25, 30}, kRoiBoxWeights), 1e-5f, "roi");
}

TEST(RcnnBoxCoder, DecodeInvertsEncodeOnRandomBoxes) {
  Rng r{2024, 1};
  for (int t = 0; t < 200; ++t) {
    const float x = 200 * r.uniform(), y = 200 * r.uniform();
    const Box ref{x, y, x + 1 + 100 * r.uniform(), y + 1 + 100 * r.uniform()};
    const float u = 200 * r.uniform(), v = 200 * r.uniform();
    const Box target{u, v, u + 1 + 100 * r.uniform(), v + 1 + 100 * r.uniform()};
    for (const BoxWeights& w : {kRpnBoxWeights, kRoiBoxWeights}) {
      const Box d = encoded(ref, target, w);
      Box back(4);
      decode_box(ref.data(), d.data(), w, back.data());
      expect_box_near(target, back, 1e-3f, "round trip");
    }
  }
}

TEST(RcnnBoxCoder, DecodeClampsLargeSizeDeltas) {
  // dw, dh clamp at log(1000/16): the 16 x 16 box centred at (8,8) grows to at most 1000 x 1000,
  // (-492, -492, 508, 508), whether the delta is 10 or 100 (exp(100) * 16 would overflow a float).
  const Box ref{0, 0, 16, 16};
  for (const float big : {10.0f, 100.0f}) {
    const Box d{0, 0, big, big};
    Box b(4);
    decode_box(ref.data(), d.data(), kRpnBoxWeights, b.data());
    expect_box_near({-492, -492, 508, 508}, b, 1e-3f, "clamped");
  }
  // Below the clamp it is not touched: dw = log 2 doubles the width.
  const Box d{0, 0, std::log(2.0f), 0};
  Box b(4);
  decode_box(ref.data(), d.data(), kRpnBoxWeights, b.data());
  expect_box_near({-8, 0, 24, 16}, b, 1e-4f, "unclamped");
}

TEST(RcnnBoxIou, HandCases) {
  const float a[4] = {0, 0, 4, 4}, disjoint[4] = {5, 5, 6, 6}, half[4] = {0, 0, 2, 4}, shifted[4] = {2, 0, 6, 4};
  const float empty[4] = {1, 1, 1, 1};
  EXPECT_EQ(box_iou(a, disjoint), 0.0f);
  EXPECT_EQ(box_iou(a, a), 1.0f);
  EXPECT_FLOAT_EQ(box_iou(a, half), 0.5f);           // half covers half of a: 8 / 16
  EXPECT_FLOAT_EQ(box_iou(a, shifted), 1.0f / 3.0f);  // 8 / (16 + 16 - 8)
  EXPECT_EQ(box_iou(empty, empty), 0.0f);             // empty union
  float c[4] = {-3, 2, 70, 50};
  clip_box(c, 40, 64);
  expect_box_near({0, 2, 64, 40}, Box(c, c + 4), 0.0f, "clip");
}

// ---- RPN targets

TEST(RcnnRpnTargets, LabelsBestAnchorsIgnoredBandAndStraddlers) {
  RpnTargetSpec spec;  // 0.7 / 0.3, batch 256: every candidate fits
  const RpnSample s = sample_scene(spec, 1, 2, 3);
  const std::vector<Box> anchors = rpn_anchors();
  ASSERT_EQ(s.positives, 3);
  ASSERT_EQ(s.index.size(), anchors.size() - kRpnIgnored.size());
  const std::set<int> pos(s.index.begin(), s.index.begin() + 3);
  EXPECT_EQ(pos, kRpnPositives);  // anchor 2 is in though its IoU 0.667 < pos_iou
  std::set<int> neg(s.index.begin() + 3, s.index.end());
  EXPECT_EQ(neg.size(), s.index.size() - 3) << "an anchor drawn twice";
  for (const int i : kRpnIgnored) EXPECT_EQ(neg.count(i), 0u) << "ignored anchor " << i << " sampled";
  for (int i = 6; i < static_cast<int>(anchors.size()); ++i) EXPECT_EQ(neg.count(i), 1u) << "negative " << i;
  // Deltas: encode_box of each positive's matched box (anchor 2 matches B, the others A).
  for (int p = 0; p < 3; ++p) {
    const int a = s.index[p];
    const Box& gt = kRpnGt[a == 2 ? 1 : 0];
    expect_box_near(encoded(anchors[a], gt, kRpnBoxWeights), box_at(s.deltas, p), 0.0f, "rpn delta");
  }
  // With straddlers allowed, anchor 3 becomes B's best (and positive at 0.818), anchor 2 drops to
  // the ignored band, and anchor 5 becomes a negative.
  spec.straddle = -1;
  const RpnSample all = sample_scene(spec, 1, 2, 3);
  EXPECT_EQ(std::set<int>(all.index.begin(), all.index.begin() + all.positives), (std::set<int>{0, 1, 3}));
  EXPECT_EQ(std::count(all.index.begin(), all.index.end(), 5), 1);
  EXPECT_EQ(std::count(all.index.begin(), all.index.end(), 2), 0);
}

TEST(RcnnRpnTargets, CountsCappedByBatchAndFraction) {
  RpnTargetSpec spec;
  spec.batch = 4;
  spec.pos_fraction = 0.5f;  // 2 of the 3 positives, then 4 - 2 = 2 negatives
  RpnSample s = sample_scene(spec, 1, 2, 3);
  EXPECT_EQ(s.positives, 2);
  EXPECT_EQ(s.index.size(), 4u);
  EXPECT_EQ(s.deltas.size(), 8u);
  for (int p = 0; p < 2; ++p) EXPECT_EQ(kRpnPositives.count(s.index[p]), 1u);
  for (int p = 2; p < 4; ++p) EXPECT_GE(s.index[p], 6);
  spec.pos_fraction = 0.25f;  // int(4 * 0.25) = 1 positive, 3 negatives
  s = sample_scene(spec, 1, 2, 3);
  EXPECT_EQ(s.positives, 1);
  EXPECT_EQ(s.index.size(), 4u);
}

TEST(RcnnRpnTargets, SampleIsTheDocumentedFisherYatesOfSeedStreamKey) {
  RpnTargetSpec spec;
  spec.batch = 4;
  const uint64_t seed = 11, stream = 5, key = 1234;
  const RpnSample s = sample_scene(spec, seed, stream, key);
  // The header's draw, written out: candidates in index order, draw i on counter key*2^20 + i
  // (positives) or key*2^20 + 2^19 + i (negatives).
  auto draw = [&](std::vector<int32_t> c, int k, uint64_t first) {
    for (int i = 0; i < k; ++i) std::swap(c[i], c[i + rng_below(seed, stream, first + i, c.size() - i)]);
    c.resize(k);
    return c;
  };
  std::vector<int32_t> negatives;
  for (int i = 6; i < static_cast<int>(rpn_anchors().size()); ++i) negatives.push_back(i);
  std::vector<int32_t> expected = draw({0, 1, 2}, 2, key << 20);
  const std::vector<int32_t> neg = draw(negatives, 2, (key << 20) + (1u << 19));
  expected.insert(expected.end(), neg.begin(), neg.end());
  EXPECT_EQ(s.index, expected);

  const RpnSample again = sample_scene(spec, seed, stream, key);
  EXPECT_EQ(again.index, s.index);
  EXPECT_EQ(again.deltas, s.deltas);
  EXPECT_NE(sample_scene(spec, seed, stream, key + 1).index, s.index);  // 30 negatives: another pair
  EXPECT_NE(sample_scene(spec, seed, stream + 1, key).index, s.index);
}

// ---- RPN loss

TEST(RcnnRpnLoss, HandValueOnePositiveOneNegative) {
  RpnSample s;
  s.index = {0, 1};
  s.positives = 1;
  s.deltas = {0.1f, 0.2f, 0.3f, 0.4f};
  const float obj[3] = {2, -1, 5};  // anchor 2 is not sampled
  const float deltas[12] = {0.15f, 0.7f, 0.3f, 0.2f, 9, 9, 9, 9, 9, 9, 9, 9};
  float dobj[3], dd[12];
  double cls = 0, box = 0;
  const double loss = rpn_loss(s, obj, deltas, 3, 1.0f, dobj, dd, &cls, &box);
  // cls = (log1p(e^-2) + log1p(e^-1)) / 2 = (0.126928011 + 0.313261688) / 2 = 0.220094850.
  // box: residuals (0.05, 0.5, 0, -0.2), beta 1/9: 0.5*0.05^2*9 + (0.5 - 1/18) + 0 + (0.2 - 1/18)
  //      = 0.01125 + 0.444444 + 0.144444 = 0.600139, / 2 = 0.300069.
  EXPECT_NEAR(cls, 0.220094850, 1e-7);
  EXPECT_NEAR(box, 0.300069444, 1e-6);
  EXPECT_NEAR(loss, cls + box, 1e-12);
  // d/dz = (sigmoid(z) - y) / 2: (0.880797 - 1) / 2 = -0.0596015, 0.268941 / 2 = 0.1344707.
  EXPECT_NEAR(dobj[0], -0.0596014611, 1e-7);
  EXPECT_NEAR(dobj[1], 0.1344707105, 1e-7);
  EXPECT_EQ(dobj[2], 0.0f);
  // Smooth-L1': x / beta inside, sign outside, / 2: (0.225, 0.5, 0, -0.5); the negative's deltas get 0.
  const float expected_dd[12] = {0.225f, 0.5f, 0, -0.5f, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < 12; ++j) EXPECT_NEAR(dd[j], expected_dd[j], 1e-6f) << j;
}

TEST(RcnnRpnLoss, GradientsMatchFiniteDifferencesAndVanishOffTheSample) {
  RpnTargetSpec spec;
  spec.batch = 16;  // the 3 positives and 13 of the 30 negatives
  const RpnSample s = sample_scene(spec, 3, 4, 5);
  const int n = static_cast<int>(rpn_anchors().size());
  std::vector<float> obj = test::random_vec(n, 1, -3, 3), del = test::random_vec(size_t(n) * 4, 2, -1, 1);
  // Keep the positives' residuals away from smooth-L1's kink at |x| = 1/9, where differences break.
  for (int p = 0; p < s.positives; ++p)
    for (int j = 0; j < 4; ++j) {
      float& d = del[size_t(s.index[p]) * 4 + j];
      if (std::fabs(std::fabs(d - s.deltas[p * 4 + j]) - 1.0f / 9) < 0.02f) d += 0.05f;
    }
  std::vector<float> dobj(n), ddel(size_t(n) * 4);
  rpn_loss(s, obj.data(), del.data(), n, 1.0f, dobj.data(), ddel.data());
  std::vector<float> sink(n), sink4(size_t(n) * 4);
  auto loss = [&] { return rpn_loss(s, obj.data(), del.data(), n, 1.0f, sink.data(), sink4.data()); };
  test::expect_grad_close("dobjectness", loss, obj.data(), obj.size(), dobj.data(), 1e-3, 1e-4, 1e-6, 1000);
  test::expect_grad_close("ddeltas", loss, del.data(), del.size(), ddel.data(), 1e-3, 1e-4, 1e-6, 1000);
  const std::set<int> sampled(s.index.begin(), s.index.end()), pos(s.index.begin(), s.index.begin() + s.positives);
  for (int a = 0; a < n; ++a) {
    if (!sampled.count(a)) {
      EXPECT_EQ(dobj[a], 0.0f) << a;
    }
    if (!pos.count(a)) {
      for (int j = 0; j < 4; ++j) EXPECT_EQ(ddel[size_t(a) * 4 + j], 0.0f) << a;
    }
  }
  // grad_scale scales the gradients, not the returned loss.
  std::vector<float> dobj2(n), ddel2(size_t(n) * 4);
  EXPECT_EQ(rpn_loss(s, obj.data(), del.data(), n, 2.0f, dobj2.data(), ddel2.data()), loss());
  for (int a = 0; a < n; ++a) EXPECT_FLOAT_EQ(dobj2[a], 2 * dobj[a]);
}

// ---- proposals

TEST(RcnnProposals, TopkClipMinSizeNmsAndCap) {
  // Image 100 x 100. Zero deltas but anchor 6, so each proposal is its anchor, clipped.
  const std::vector<float> anchors = flat({
      {10, 10, 50, 50},    // 0 score 5: kept
      {12, 12, 52, 52},    // 1 score 4: IoU with 0 = 38*38 / (3200 - 1444) = 0.822 > 0.7, suppressed
      {60, 60, 90, 90},    // 2 score 3: kept
      {80, 80, 120, 120},  // 3 score 2: clipped to (80,80,100,100); IoU with 2 = 100/1200: kept
      {5, 5, 7, 50},       // 4 score 6: 2 wide, dropped at min_size 3
      {0, 0, 40, 40},      // 5 score -1: 7th of 7, outside pre_nms_topk 6
      {20, 60, 40, 70},    // 6 score 1: delta (0.5, 0, log 2, 0): centre x 30 + 10, width 40 -> (20,60,60,70)
  });
  const std::vector<float> obj{5, 4, 3, 2, 6, -1, 1};
  std::vector<float> deltas(7 * 4, 0.0f);
  deltas[6 * 4 + 0] = 0.5f;
  deltas[6 * 4 + 2] = std::log(2.0f);
  ProposalSpec spec;
  spec.pre_nms_topk = 6;
  spec.post_nms_topk = 10;
  spec.nms_iou = 0.7f;
  spec.min_size = 3;
  Proposals p = make_proposals(spec, anchors.data(), obj.data(), deltas.data(), 7, 100, 100);
  ASSERT_EQ(p.count(), 4);
  EXPECT_EQ(p.scores, (std::vector<float>{5, 3, 2, 1}));
  expect_box_near({10, 10, 50, 50}, box_at(p.boxes, 0), 0, "0");
  expect_box_near({60, 60, 90, 90}, box_at(p.boxes, 1), 0, "2");
  expect_box_near({80, 80, 100, 100}, box_at(p.boxes, 2), 0, "3 clipped");
  expect_box_near({20, 60, 60, 70}, box_at(p.boxes, 3), 1e-4f, "6 decoded");

  spec.min_size = 0;  // anchor 4 (score 6) comes first, and it overlaps nothing
  p = make_proposals(spec, anchors.data(), obj.data(), deltas.data(), 7, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{6, 5, 3, 2, 1}));
  spec.pre_nms_topk = 7;  // now anchor 5 (IoU with 0 = 900 / 2300 = 0.39) survives too, last
  p = make_proposals(spec, anchors.data(), obj.data(), deltas.data(), 7, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{6, 5, 3, 2, 1, -1}));
  spec.post_nms_topk = 2;
  p = make_proposals(spec, anchors.data(), obj.data(), deltas.data(), 7, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{6, 5}));
  EXPECT_EQ(p.boxes.size(), 8u);
}

TEST(RcnnProposals, EqualScoresRankLowerIndexFirst) {
  // Three disjoint anchors of one score; pre_nms_topk 2 keeps anchors 0 and 1, in that order.
  const std::vector<float> anchors = flat({{0, 0, 10, 10}, {20, 0, 30, 10}, {40, 0, 50, 10}});
  const std::vector<float> obj{1, 1, 1}, deltas(12, 0.0f);
  ProposalSpec spec;
  spec.pre_nms_topk = 2;
  const Proposals p = make_proposals(spec, anchors.data(), obj.data(), deltas.data(), 3, 100, 100);
  ASSERT_EQ(p.count(), 2);
  EXPECT_EQ(p.boxes[0], 0.0f);
  EXPECT_EQ(p.boxes[4], 20.0f);
}

// Two levels: NMS stays within a level (level 1's box overlapping level 0's best survives), each
// level keeps its own pre/post top-k, and the merged list is the best post_nms_topk by score.
TEST(RcnnProposals, LevelsHaveTheirOwnNmsAndTheBestOverAllLevelsAreKept) {
  const std::vector<float> anchors = flat({{0, 0, 40, 40}, {2, 2, 40, 40}, {60, 0, 90, 30},  // level 0
                                           {0, 0, 40, 41}, {60, 60, 90, 90}});               // level 1
  const std::vector<float> obj{5, 4, 1, 3, 2}, deltas(5 * 4, 0.0f);
  ProposalSpec spec;
  spec.pre_nms_topk = 3;
  spec.post_nms_topk = 10;
  spec.nms_iou = 0.7f;
  // Level 0: anchor 1 (IoU 0.90 with anchor 0) suppressed; level 1 keeps anchor 3 though it
  // overlaps anchor 0 as much.
  Proposals p = make_level_proposals(spec, anchors.data(), obj.data(), deltas.data(), {0, 3, 5}, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{5, 3, 2, 1}));
  expect_box_near({0, 0, 40, 41}, box_at(p.boxes, 1), 0, "level 1's overlapping box");
  // One NMS over all five (one level) suppresses it.
  spec.pre_nms_topk = 5;
  p = make_level_proposals(spec, anchors.data(), obj.data(), deltas.data(), {0, 5}, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{5, 2, 1}));
  spec.pre_nms_topk = 3;
  // post_nms_topk over the levels, and pre_nms_topk per level.
  spec.post_nms_topk = 2;
  p = make_level_proposals(spec, anchors.data(), obj.data(), deltas.data(), {0, 3, 5}, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{5, 3}));
  spec.post_nms_topk = 10;
  spec.pre_nms_topk = 1;
  p = make_level_proposals(spec, anchors.data(), obj.data(), deltas.data(), {0, 3, 5}, 100, 100);
  EXPECT_EQ(p.scores, (std::vector<float>{5, 3}));
  EXPECT_ANY_THROW(make_level_proposals(spec, anchors.data(), obj.data(), deltas.data(), {1, 5}, 100, 100));
}

// ---- the batched ops (kernels/op_signatures.inc) that the step runs on its device: a batch gives
// every image what the one-image functions give it, bit for bit.

TEST(RcnnRpnBatch, ProposalsOfABatchAreEachImagesOwn) {
  constexpr int n = 3, levels = 3, A = 75;
  const std::vector<int> first{0, 40, 65, A};
  Rng r{7, 3};
  std::vector<float> anchors(size_t(A) * 4);
  for (int a = 0; a < A; ++a) {  // boxes 4 to 44 a side in a 100 x 80 image, some crossing its border
    const float x = float(r.uniform() * 100 - 10), y = float(r.uniform() * 80 - 10);
    const float w = float(4 + r.uniform() * 40), h = float(4 + r.uniform() * 40);
    const float b[4] = {x, y, x + w, y + h};
    std::copy(b, b + 4, anchors.begin() + a * 4);
  }
  std::vector<float> obj = test::random_vec(size_t(n) * A, 8, -4, 4);
  const std::vector<float> del = test::random_vec(size_t(n) * A * 4, 9, -0.5f, 0.5f);
  for (int a = 0; a < A; a += 9) obj[size_t(a)] = obj[size_t(a) + 1];  // ties in image 0
  ProposalSpec spec;
  spec.pre_nms_topk = 12;
  spec.post_nms_topk = 15;  // three levels of up to 12 survivors: the cap binds
  spec.nms_iou = 0.5f;
  spec.min_size = 6;
  const int post = spec.post_nms_topk;
  std::vector<float> boxes(size_t(n) * post * 4, -7.0f), scores(size_t(n) * post, -7.0f);
  std::vector<int32_t> count(n, -1);
  const std::vector<int32_t> bounds(first.begin(), first.end());
  Arena arena;
  arena_init(arena, rpn_proposals_scratch_floats(n, A, levels, spec.pre_nms_topk, post) * sizeof(float));
  rpn_proposals(obj.data(), del.data(), anchors.data(), n, A, bounds.data(), levels, 80, 100, spec.pre_nms_topk, post,
                spec.nms_iou, spec.min_size, boxes.data(), scores.data(), count.data(), arena);
  int capped = 0;
  for (int i = 0; i < n; ++i) {
    const Proposals p = make_level_proposals(spec, anchors.data(), obj.data() + size_t(i) * A,
                                             del.data() + size_t(i) * A * 4, first, 80, 100);
    ASSERT_EQ(count[i], p.count()) << "image " << i;
    capped += p.count() == post;
    const float* b = boxes.data() + size_t(i) * post * 4;
    const float* sc = scores.data() + size_t(i) * post;
    EXPECT_EQ(std::vector<float>(b, b + p.boxes.size()), p.boxes) << "image " << i;
    EXPECT_EQ(std::vector<float>(sc, sc + p.count()), p.scores) << "image " << i;
    for (int k = p.count(); k < post; ++k) {
      EXPECT_EQ(sc[k], 0.0f);
      for (int j = 0; j < 4; ++j) EXPECT_EQ(b[size_t(k) * 4 + j], 0.0f);
    }
  }
  EXPECT_GT(capped, 0) << "the case reaches post_nms_topk somewhere";
  const std::vector<int32_t> bad{0, 40, 65, 74};  // not ending at the anchor count
  EXPECT_ANY_THROW(rpn_proposals(obj.data(), del.data(), anchors.data(), n, A, bad.data(), levels, 80, 100, 12, post,
                                 0.5f, 6, boxes.data(), scores.data(), count.data(), arena));
}

TEST(RcnnRpnBatch, LossOfABatchIsTheSumOfEachImagesOwn) {
  constexpr int n = 3;
  RpnTargetSpec spec;
  spec.batch = 16;
  const int A = static_cast<int>(rpn_anchors().size());
  std::vector<RpnSample> samples;
  for (int i = 0; i < n; ++i) samples.push_back(sample_scene(spec, 3, 4, 5 + uint64_t(i)));
  samples[1].index.resize(size_t(samples[1].positives));  // an image with positives only
  samples[2] = RpnSample{};                                // and one with no sample at all
  const std::vector<float> obj = test::random_vec(size_t(n) * A, 11, -3, 3);
  const std::vector<float> del = test::random_vec(size_t(n) * A * 4, 12, -1, 1);
  std::vector<int32_t> index, sample_first{0}, positive_first{0};
  std::vector<float> targets;
  for (const RpnSample& s : samples) {
    index.insert(index.end(), s.index.begin(), s.index.end());
    targets.insert(targets.end(), s.deltas.begin(), s.deltas.end());
    sample_first.push_back(static_cast<int32_t>(index.size()));
    positive_first.push_back(positive_first.back() + s.positives);
  }
  std::vector<float> dobj(size_t(n) * A, 9.0f), ddel(size_t(n) * A * 4, 9.0f);  // overwritten whole
  double parts[2] = {0.0, 0.0};
  Arena none;
  rpn_loss_batch(obj.data(), del.data(), n, A, index.data(), sample_first.data(), positive_first.data(),
                 targets.data(), 0.5f, dobj.data(), ddel.data(), parts, none);
  const double cls = parts[0], box = parts[1], total = cls + box;
  double cls_sum = 0, box_sum = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<float> d1(static_cast<size_t>(A)), d4(static_cast<size_t>(A) * 4);
    double c = 0, b = 0;
    rpn_loss(samples[size_t(i)], obj.data() + size_t(i) * A, del.data() + size_t(i) * A * 4, A, 0.5f, d1.data(),
             d4.data(), &c, &b);
    cls_sum += c;
    box_sum += b;
    EXPECT_EQ(std::vector<float>(dobj.begin() + i * A, dobj.begin() + (i + 1) * A), d1) << "image " << i;
    EXPECT_EQ(std::vector<float>(ddel.begin() + i * A * 4, ddel.begin() + (i + 1) * A * 4), d4) << "image " << i;
  }
  EXPECT_EQ(cls, cls_sum);
  EXPECT_EQ(box, box_sum);
  EXPECT_EQ(total, cls_sum + box_sum);
  EXPECT_GT(cls, 0.0);
  EXPECT_GT(box, 0.0);
  index[2] = A;  // an anchor past the image's
  EXPECT_ANY_THROW(rpn_loss_batch(obj.data(), del.data(), n, A, index.data(), sample_first.data(),
                                  positive_first.data(), targets.data(), 0.5f, dobj.data(), ddel.data(), nullptr,
                                  none));
}

TEST(RcnnBoxLossBatch, LossOfABatchIsEachImagesCrossEntropyAndBoxLoss) {
  constexpr int C = 4, n = 3;
  std::vector<RoiSample> samples(n);
  samples[0] = sample_roi_scene(RoiSampleSpec{});  // 6 foreground, 2 background
  samples[2] = samples[0];
  samples[2].foreground = 0;  // background only
  samples[2].deltas.clear();
  std::fill(samples[2].labels.begin(), samples[2].labels.end(), 0);  // (samples[1]: no RoI at all)
  std::vector<int32_t> labels, row_first{0}, fg_first{0};
  std::vector<float> targets;
  for (const RoiSample& s : samples) {
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    targets.insert(targets.end(), s.deltas.begin(), s.deltas.end());
    row_first.push_back(static_cast<int32_t>(labels.size()));
    fg_first.push_back(fg_first.back() + s.foreground);
  }
  const int R = row_first.back();
  const std::vector<float> logits = test::random_vec(size_t(R) * C, 21, -3, 3);
  const std::vector<float> deltas = test::random_vec(size_t(R) * C * 4, 22, -2, 2);
  std::vector<float> dcls(size_t(R) * C, 9.0f), dbox(size_t(R) * C * 4, 9.0f);  // overwritten whole
  double parts[2] = {0.0, 0.0};
  Arena none;
  rcnn_box_loss(logits.data(), deltas.data(), n, C, labels.data(), row_first.data(), fg_first.data(), targets.data(),
                0.5f, dcls.data(), dbox.data(), parts, none);
  const double cls = parts[0], box = parts[1], total = cls + box;
  double cls_sum = 0, box_sum = 0;
  for (int i = 0; i < n; ++i) {
    const RoiSample& s = samples[size_t(i)];
    const int r0 = row_first[size_t(i)], k = s.count();
    if (k == 0) continue;
    std::vector<float> gc(static_cast<size_t>(k) * C), gb(static_cast<size_t>(k) * C * 4);
    double image_cls = 0.0;
    softmax_xent(logits.data() + size_t(r0) * C, s.labels.data(), k, C, 0.0f, 0.5f / float(k), gc.data(), &image_cls,
                 nullptr);
    cls_sum += image_cls / k;
    box_sum += roi_box_loss(s, deltas.data() + size_t(r0) * C * 4, C, 0.5f, gb.data());
    EXPECT_EQ(std::vector<float>(dcls.begin() + r0 * C, dcls.begin() + (r0 + k) * C), gc) << "image " << i;
    EXPECT_EQ(std::vector<float>(dbox.begin() + r0 * C * 4, dbox.begin() + (r0 + k) * C * 4), gb) << "image " << i;
  }
  EXPECT_EQ(cls, cls_sum);
  EXPECT_EQ(box, box_sum);
  EXPECT_EQ(total, cls_sum + box_sum);
  EXPECT_GT(cls, 0.0);
  EXPECT_GT(box, 0.0);
  labels[0] = 0;  // a foreground RoI labelled background
  EXPECT_ANY_THROW(rcnn_box_loss(logits.data(), deltas.data(), n, C, labels.data(), row_first.data(), fg_first.data(),
                                 targets.data(), 0.5f, dcls.data(), dbox.data(), nullptr, none));
}

TEST(RcnnMaskLossBatch, GivesTheBitsOfAGatherPerImageBceAndScatter) {
  constexpr int n = 3, pixels = 9, C = 5;
  const std::vector<int32_t> row_first{0, 2, 2, 5};  // image 1 has no mask row
  const std::vector<int32_t> labels{1, 4, 2, 2, 3};
  const int rows = row_first.back();
  const std::vector<float> logits = test::random_vec(size_t(rows) * pixels * C, 31, -6, 6);
  std::vector<uint8_t> targets(size_t(rows) * pixels);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = uint8_t((i * 7 + i / 5) % 3 == 0);
  std::vector<float> dlogits(logits.size(), 9.0f);  // overwritten whole
  Arena arena;
  arena_init(arena, rcnn_mask_loss_scratch_floats(n, rows, pixels) * sizeof(float));
  double loss = 0.0;
  rcnn_mask_loss(logits.data(), n, rows, pixels, C, labels.data(), targets.data(), row_first.data(), 0.5f,
                 dlogits.data(), &loss, arena);
  // What the step did before: pick each row's label channel, one sigmoid_bce per image, add back.
  std::vector<int32_t> index;
  std::vector<float> t;
  for (int r = 0; r < rows; ++r)
    for (int p = 0; p < pixels; ++p) {
      index.push_back((r * pixels + p) * C + labels[size_t(r)]);
      t.push_back(targets[size_t(r) * pixels + p] ? 1.0f : 0.0f);
    }
  std::vector<float> picked(index.size()), dpicked(index.size()), want(logits.size(), 0.0f);
  embedding_gather(logits.data(), 1, index.data(), static_cast<int>(index.size()), picked.data(), 1);
  double want_loss = 0;
  for (int i = 0; i < n; ++i) {
    const size_t first = size_t(row_first[size_t(i)]) * pixels, count = size_t(row_first[size_t(i) + 1]) * pixels - first;
    if (count == 0) continue;
    double image = 0.0;
    sigmoid_bce(picked.data() + first, t.data() + first, static_cast<int>(count), 0.5f / float(count),
                dpicked.data() + first, &image);
    want_loss += image / double(count);
  }
  embedding_scatter_add(want.data(), 1, index.data(), static_cast<int>(index.size()), dpicked.data(), 1);
  EXPECT_EQ(loss, want_loss);
  EXPECT_EQ(dlogits, want);
  EXPECT_GT(loss, 0.0);
  std::vector<int32_t> bad = labels;
  bad[3] = C;
  EXPECT_ANY_THROW(rcnn_mask_loss(logits.data(), n, rows, pixels, C, bad.data(), targets.data(), row_first.data(), 0.5f,
                                  dlogits.data(), nullptr, arena));
}

// ---- RoI sampling and the box loss

TEST(RcnnRoiSample, GtAppendedLabelsMatchedDeltasConsistent) {
  const RoiSample s = sample_roi_scene(RoiSampleSpec{});  // batch 64, 0.25: every candidate fits
  // Candidates: proposals 0..5 then G0, G1 as 6, 7. fg: 0, 1, 2, 5, G0, G1; bg: 3, 4.
  ASSERT_EQ(s.foreground, 6);
  ASSERT_EQ(s.count(), 8);
  ASSERT_EQ(s.rois.size(), 32u);
  ASSERT_EQ(s.deltas.size(), 24u);
  std::vector<float> cand = roi_proposals().boxes;
  const std::vector<float> gt = flat(kRoiGt);
  cand.insert(cand.end(), gt.begin(), gt.end());
  const std::vector<int> expected_match{0, 0, 1, -1, -1, 0, 0, 1};  // by candidate
  std::multiset<std::vector<float>> fg_seen, bg_seen;
  int gt_rows = 0;
  for (int i = 0; i < s.count(); ++i) {
    const Box roi = box_at(s.rois, i);
    int c = 0;  // the first candidate with this box (proposal 0 and G0 are the same box, same match)
    while (c < 8 && box_at(cand, c) != roi) ++c;
    ASSERT_LT(c, 8) << "row " << i << " is no candidate";
    if (i < s.foreground) {
      fg_seen.insert(roi);
      ASSERT_EQ(s.matched[i], expected_match[c]) << "row " << i;
      EXPECT_EQ(s.labels[i], kRoiGtLabels[s.matched[i]]);
      expect_box_near(encoded(roi, kRoiGt[s.matched[i]], kRoiBoxWeights), box_at(s.deltas, i), 0, "roi delta");
      if (roi == kRoiGt[s.matched[i]]) {  // a gt box (or proposal 0, its copy): IoU 1, deltas 0
        ++gt_rows;
        EXPECT_EQ(box_iou(roi.data(), kRoiGt[s.matched[i]].data()), 1.0f);
        expect_box_near({0, 0, 0, 0}, box_at(s.deltas, i), 0, "gt delta");
      }
    } else {
      bg_seen.insert(roi);
      EXPECT_EQ(expected_match[c], -1) << "row " << i;
      EXPECT_EQ(s.labels[i], 0);
      EXPECT_EQ(s.matched[i], -1);
    }
  }
  EXPECT_EQ(gt_rows, 3);  // G0, G1 and proposal 0
  EXPECT_EQ(fg_seen.size(), 6u);
  EXPECT_EQ(bg_seen, (std::multiset<std::vector<float>>{box_at(cand, 3), box_at(cand, 4)}));
}

TEST(RcnnRoiSample, CapsBackgroundBandAndNoProposals) {
  RoiSampleSpec spec;
  spec.batch = 8;  // int(8 * 0.25) = 2 fg of 6; then both bg (8 - 2 = 6 allowed)
  RoiSample s = sample_roi_scene(spec);
  EXPECT_EQ(s.foreground, 2);
  EXPECT_EQ(s.count(), 4);
  spec.batch = 64;
  spec.bg_iou_lo = 0.1f;  // proposal 4 (IoU 0) is no longer background
  s = sample_roi_scene(spec);
  EXPECT_EQ(s.count() - s.foreground, 1);
  EXPECT_EQ(box_at(s.rois, s.count() - 1), (Box{30, 10, 70, 50}));
  // Same key, same sample; another key, another order of the foreground.
  spec = RoiSampleSpec{};
  EXPECT_EQ(sample_roi_scene(spec, 7).rois, sample_roi_scene(spec, 7).rois);
  EXPECT_NE(sample_roi_scene(spec, 7).rois, sample_roi_scene(spec, 8).rois);
  // No proposals at all: the gt boxes alone, both foreground.
  const std::vector<float> gt = flat(kRoiGt);
  s = sample_rois(spec, Proposals{}, gt.data(), kRoiGtLabels.data(), 2, 1, 2, 3);
  EXPECT_EQ(s.foreground, 2);
  EXPECT_EQ(s.count(), 2);
}

TEST(RcnnMatching, TiesGoToTheLowerIndexedBox) {
  // G0 = (0,0,20,10), G1 = (10,0,30,10); the box (5,0,25,10) has IoU 150 / 250 = 0.6 with both.
  const std::vector<float> gt = flat({{0, 0, 20, 10}, {10, 0, 30, 10}});
  const Box tied{5, 0, 25, 10};
  // RPN: the tied anchor is both boxes' best (0.6 < 0.7): positive, matched to G0.
  const std::vector<float> anchors = flat({tied, {30, 20, 34, 24}});
  const RpnSample r = sample_rpn_targets(RpnTargetSpec{}, anchors.data(), 2, gt.data(), 2, 40, 40, 1, 2, 3);
  ASSERT_EQ(r.positives, 1);
  EXPECT_EQ(r.index, (std::vector<int32_t>{0, 1}));
  expect_box_near(encoded(tied, {0, 0, 20, 10}, kRpnBoxWeights), box_at(r.deltas, 0), 0, "rpn tie");
  // RoIs: the tied proposal is foreground with G0's label and match.
  Proposals p;
  p.boxes = tied;
  p.scores = {1};
  const std::vector<int32_t> labels{5, 2};
  const RoiSample s = sample_rois(RoiSampleSpec{}, p, gt.data(), labels.data(), 2, 1, 2, 3);
  ASSERT_EQ(s.foreground, 3);
  int seen = 0;
  for (int i = 0; i < 3; ++i)
    if (box_at(s.rois, i) == tied) {
      ++seen;
      EXPECT_EQ(s.matched[i], 0);
      EXPECT_EQ(s.labels[i], 5);
    }
  EXPECT_EQ(seen, 1);
}

// The batch ops (what a training step calls) against the one-image functions: image i of the batch
// samples with key + i into rows packed image after image, padding zeroed; its first per_image
// foreground rows become mask rows with their targets.
TEST(RcnnRoiSample, BatchOpPacksTheImagesSamplesAndTheirMaskTargets) {
  const RoiSampleSpec spec{4, 0.5f, 0.5f, 0.5f, 0.0f};
  const Proposals p = roi_proposals();
  const std::vector<float> gt = flat(kRoiGt);
  // Image 0: both instances; image 1: none; image 2: the second instance alone (label 1).
  const std::vector<float> gt_boxes{gt[0], gt[1], gt[2], gt[3], gt[4], gt[5], gt[6], gt[7], gt[4], gt[5], gt[6], gt[7]};
  const std::vector<int32_t> gt_labels{3, 1, 1}, gt_first{0, 2, 2, 3}, counts{6, 6, 6};
  const int n = 3, P = p.count(), R = n * spec.batch + 2;
  std::vector<float> proposals;
  for (int i = 0; i < n; ++i) proposals.insert(proposals.end(), p.boxes.begin(), p.boxes.end());
  const RoiSampling rs{spec.batch, spec.pos_fraction, spec.fg_iou, spec.bg_iou_hi, spec.bg_iou_lo, 42, 9, 7};
  std::vector<float> rois(size_t(R) * 5, -1.0f), deltas(size_t(R) * 4, -1.0f);
  std::vector<int32_t> row_first(n + 1), fg_first(n + 1), labels(size_t(R), 5), matched(size_t(R), 5);
  Arena none;
  rcnn_sample_rois(rs, proposals.data(), counts.data(), P, gt_boxes.data(), gt_labels.data(), gt_first.data(), n, 2, R,
                   rois.data(), row_first.data(), fg_first.data(), labels.data(), matched.data(), deltas.data(), none);
  // One 100 x 100 mask per instance: its box filled.
  std::vector<uint8_t> masks(3 * 100 * 100, 0);
  for (int g = 0; g < 3; ++g)
    for (int y = int(gt_boxes[size_t(g) * 4 + 1]); y < int(gt_boxes[size_t(g) * 4 + 3]); ++y)
      for (int x = int(gt_boxes[size_t(g) * 4]); x < int(gt_boxes[size_t(g) * 4 + 2]); ++x)
        masks[(g * 100 + y) * 100 + x] = 1;
  const int per_image = 1, m = 4, F = n * per_image;
  std::vector<float> mask_rois(size_t(F) * 5, -1.0f);
  std::vector<int32_t> mask_first(n + 1), mask_labels(size_t(F), 5);
  std::vector<uint8_t> targets(size_t(F) * m * m, 9);
  rcnn_mask_targets(rois.data(), row_first.data(), fg_first.data(), labels.data(), matched.data(), n, per_image,
                    masks.data(), gt_first.data(), 100, 100, m, F, mask_rois.data(), mask_first.data(),
                    mask_labels.data(), targets.data());
  for (int i = 0; i < n; ++i) {
    const int g0 = gt_first[size_t(i)], G = gt_first[size_t(i) + 1] - g0;
    const RoiSample s =
        sample_rois(spec, p, gt_boxes.data() + size_t(g0) * 4, gt_labels.data() + g0, G, 42, 9, 7 + uint64_t(i));
    const int r0 = row_first[size_t(i)];
    ASSERT_EQ(row_first[size_t(i) + 1] - r0, s.count()) << "image " << i;
    ASSERT_EQ(fg_first[size_t(i) + 1] - fg_first[size_t(i)], s.foreground) << "image " << i;
    for (int r = 0; r < s.count(); ++r) {
      EXPECT_EQ(rois[size_t(r0 + r) * 5], float(i));
      for (int c = 0; c < 4; ++c) EXPECT_EQ(rois[size_t(r0 + r) * 5 + 1 + c], s.rois[size_t(r) * 4 + c]);
      EXPECT_EQ(labels[size_t(r0 + r)], s.labels[size_t(r)]);
      EXPECT_EQ(matched[size_t(r0 + r)], s.matched[size_t(r)]);
    }
    for (int r = 0; r < s.foreground * 4; ++r)
      EXPECT_EQ(deltas[size_t(fg_first[size_t(i)]) * 4 + r], s.deltas[size_t(r)]);
    const int f = std::min(s.foreground, per_image);
    ASSERT_EQ(mask_first[size_t(i) + 1] - mask_first[size_t(i)], f);
    if (f == 0) continue;
    std::vector<const uint8_t*> own;
    for (int g = 0; g < G; ++g) own.push_back(masks.data() + size_t(g0 + g) * 100 * 100);
    const std::vector<float> want = mask_targets(s, own, 100, 100, m);
    const int o = mask_first[size_t(i)];
    EXPECT_EQ(mask_labels[size_t(o)], s.labels[0]);
    for (int q = 0; q < m * m; ++q) EXPECT_EQ(float(targets[size_t(o) * m * m + q]), want[size_t(q)]) << "pixel " << q;
  }
  EXPECT_EQ(fg_first[1], 2) << "image 0 samples its two foreground (of six)";
  for (int r = row_first[n]; r < R; ++r) {
    EXPECT_EQ(labels[size_t(r)], 0);
    EXPECT_EQ(matched[size_t(r)], -1);
    for (int c = 0; c < 5; ++c) EXPECT_EQ(rois[size_t(r) * 5 + c], 0.0f) << "padding row " << r;
  }
}

TEST(RcnnRoiBoxLoss, HandValueAndGradientsMatchFiniteDifferences) {
  const int classes = 4, row = classes * 4;
  {
    // Row 0 foreground class 1, target deltas 0, prediction (0.5, -2, 0, 0): 0.5*0.25 + (2 - 0.5) =
    // 1.625, over 2 rows = 0.8125; gradient (0.5, -1, 0, 0) / 2. Row 1 background: nothing.
    RoiSample s;
    s.rois = {0, 0, 1, 1, 0, 0, 1, 1};
    s.labels = {1, 0};
    s.matched = {0, -1};
    s.deltas = {0, 0, 0, 0};
    s.foreground = 1;
    std::vector<float> pred(2 * row, 7.0f), grad(2 * row, 1.0f);
    pred[4] = 0.5f, pred[5] = -2, pred[6] = 0, pred[7] = 0;
    EXPECT_DOUBLE_EQ(roi_box_loss(s, pred.data(), classes, 1.0f, grad.data()), 0.8125);
    for (int j = 0; j < 2 * row; ++j) {
      const float e = j == 4 ? 0.25f : j == 5 ? -0.5f : 0.0f;
      EXPECT_EQ(grad[j], e) << j;
    }
  }
  const RoiSample s = sample_roi_scene(RoiSampleSpec{});  // 6 fg (labels 3 and 1), 2 bg
  const int n = s.count();
  std::vector<float> pred = test::random_vec(size_t(n) * row, 3, -2, 2);
  for (int i = 0; i < s.foreground; ++i)  // away from the kink at |residual| = 1
    for (int j = 0; j < 4; ++j) {
      float& p = pred[size_t(i) * row + s.labels[i] * 4 + j];
      if (std::fabs(std::fabs(p - s.deltas[i * 4 + j]) - 1.0f) < 0.02f) p += 0.05f;
    }
  std::vector<float> grad(size_t(n) * row, 1.0f), sink(size_t(n) * row);
  roi_box_loss(s, pred.data(), classes, 1.0f, grad.data());
  auto loss = [&] { return roi_box_loss(s, pred.data(), classes, 1.0f, sink.data()); };
  test::expect_grad_close("dbox_deltas", loss, pred.data(), pred.size(), grad.data(), 1e-3, 1e-4, 1e-6, 1000);
  int nonzero = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < row; ++j) {
      const bool label_col = i < s.foreground && j / 4 == s.labels[i];
      if (!label_col) {
        EXPECT_EQ(grad[size_t(i) * row + j], 0.0f) << i << "," << j;
      }
      nonzero += grad[size_t(i) * row + j] != 0.0f;
    }
  EXPECT_GT(nonzero, 20);  // the foreground rows do get gradients
}

// ---- mask targets

TEST(RcnnMaskTargets, RectangleRoisGiveOnesAndHalves) {
  // 32 x 32 image. Instance 0: ones on x, y in [8, 24). Instance 1: ones on x in [0, 16), y in [8, 24).
  const int H = 32, W = 32, m = 8;
  std::vector<uint8_t> m0(H * W, 0), m1(H * W, 0);
  for (int y = 8; y < 24; ++y)
    for (int x = 0; x < 24; ++x) {
      if (x >= 8) m0[y * W + x] = 1;
      if (x < 16) m1[y * W + x] = 1;
    }
  RoiSample s;
  s.rois = flat({
      {8, 8, 24, 24},    // instance 0, the RoI is its rectangle: all ones (the corner bin averages
                         // 0.5625: samples at 23.5 read half a pixel of the outside)
      {-16, 8, 16, 24},  // instance 1, left half outside the image: samples at x < -1 read 0,
                         // column 3's four samples -3.5..-0.5 average 0.25 -> right half ones
      {16, 8, 32, 24},   // instance 0, right half outside the rectangle: column 3 samples 22.5, 23.5
                         // average 0.75, column 4's 24.5, 25.5 read 0 -> left half ones
      {0, 0, 4, 4},      // background: no target
  });
  s.labels = {1, 1, 1, 0};
  s.matched = {0, 1, 0, -1};
  s.deltas.assign(12, 0.0f);
  s.foreground = 3;
  const std::vector<float> t = mask_targets(s, {m0.data(), m1.data()}, H, W, m);
  ASSERT_EQ(t.size(), size_t(3 * m * m));
  for (int y = 0; y < m; ++y)
    for (int x = 0; x < m; ++x) {
      EXPECT_EQ(t[(0 * m + y) * m + x], 1.0f) << "roi 0 at " << y << "," << x;
      EXPECT_EQ(t[(1 * m + y) * m + x], x >= 4 ? 1.0f : 0.0f) << "roi 1 at " << y << "," << x;
      EXPECT_EQ(t[(2 * m + y) * m + x], x < 4 ? 1.0f : 0.0f) << "roi 2 at " << y << "," << x;
    }
}

TEST(RcnnMaskTargets, SamplesAsRoiAlignWithoutTheHalfPixelShift) {
  // 8 x 8 mask, ones in column x = 2 only; RoI (0, 0, 4, 4), m = 2: bin 2 wide, 2 samples a side.
  // aligned=false samples x = 2.5 and 3.5: column 2 weighs 0.5 and 0 -> 0.25 -> 0 everywhere.
  // (aligned=true would sample x = 2 and 3 -> 0.5 -> ones in the right column.)
  std::vector<uint8_t> mask(64, 0);
  for (int y = 0; y < 8; ++y) mask[y * 8 + 2] = 1;
  RoiSample s;
  s.rois = {0, 0, 4, 4};
  s.labels = {1};
  s.matched = {0};
  s.deltas.assign(4, 0.0f);
  s.foreground = 1;
  EXPECT_EQ(mask_targets(s, {mask.data()}, 8, 8, 2), std::vector<float>(4, 0.0f));
}

// ---- detections

TEST(RcnnDetect, SoftmaxNmsThresholdCapAndOrder) {
  // Classes: background, 1, 2. Logits are logs of ratios, so the probabilities are those ratios.
  const int classes = 3;
  const std::vector<float> rois = flat({
      {10, 10, 50, 50},  // r0: (1, 8, 1)/10 -> c1 0.8, c2 0.1
      {12, 12, 52, 52},  // r1: (1, 6, 3)/10 -> c1 0.6, c2 0.3; IoU with r0 = 0.822
      {60, 60, 90, 90},  // r2: (3, 1, 6)/10 -> c1 0.1, c2 0.6; c2 deltas (1, 0, 0, 0) / weights: +3 in x
      {0, 0, 20, 20},    // r3: (97, 2, 1)/100 -> 0.02, 0.01: both below 0.05
      {60, 10, 90, 40},  // r4: (2, 4, 4)/10 -> 0.4, 0.4 (the same bits); c1 deltas (0,0,5 log 2,0):
                         //     width 60 about x 75, clipped to (45, 10, 100, 40)
      {0, 60, 20, 80},   // r5: as r4 with zero deltas
  });
  auto logs = [](float a, float b, float c) { return std::vector<float>{std::log(a), std::log(b), std::log(c)}; };
  std::vector<float> logits;
  for (const auto& l : {logs(1, 8, 1), logs(1, 6, 3), logs(3, 1, 6), logs(97, 2, 1), logs(2, 4, 4), logs(2, 4, 4)})
    logits.insert(logits.end(), l.begin(), l.end());
  std::vector<float> deltas(6 * classes * 4, 0.0f);
  deltas[(2 * classes + 2) * 4 + 0] = 1.0f;  // r2, class 2: dx = 1 / 10 of width 30
  deltas[(4 * classes + 1) * 4 + 2] = 5 * std::log(2.0f);  // r4, class 1: dw = log 2
  DetectSpec spec;  // 0.05, NMS 0.5, 100
  // Class 1: r0 0.8 keeps, r1 0.6 suppressed by r0, r4 0.4, r5 0.4, r2 0.1 kept. Class 2: r2 0.6,
  // r4 0.4, r5 0.4, r1 0.3 kept, r0 0.1 suppressed by r1. Ties: lower class, then lower RoI.
  struct Want {
    float score;
    int label;
    Box box;
  };
  const std::vector<Want> want{{0.8f, 1, {10, 10, 50, 50}}, {0.6f, 2, {63, 60, 93, 90}},
                               {0.4f, 1, {45, 10, 100, 40}}, {0.4f, 1, {0, 60, 20, 80}},
                               {0.4f, 2, {60, 10, 90, 40}}, {0.4f, 2, {0, 60, 20, 80}},
                               {0.3f, 2, {12, 12, 52, 52}}, {0.1f, 1, {60, 60, 90, 90}}};
  auto check = [&](const Detections& d, size_t count, const char* what) {
    ASSERT_EQ(d.count(), static_cast<int>(count)) << what;
    ASSERT_EQ(d.boxes.size(), 4 * count);
    for (size_t r = 0; r < count; ++r) {
      EXPECT_NEAR(d.scores[r], want[r].score, 1e-6f) << what << " rank " << r;
      EXPECT_EQ(d.labels[r], want[r].label) << what << " rank " << r;
      expect_box_near(want[r].box, box_at(d.boxes, static_cast<int>(r)), 1e-4f, what);
    }
    for (size_t r = 1; r < count; ++r) EXPECT_GE(d.scores[r - 1], d.scores[r]);
  };
  check(detect_boxes(spec, rois.data(), logits.data(), deltas.data(), 6, classes, 100, 100), 8, "all");
  spec.score_threshold = 0.35f;
  check(detect_boxes(spec, rois.data(), logits.data(), deltas.data(), 6, classes, 100, 100), 6, "threshold");
  spec.score_threshold = 0.05f;
  spec.max_dets = 3;
  check(detect_boxes(spec, rois.data(), logits.data(), deltas.data(), 6, classes, 100, 100), 3, "cap");
}

// ---- pasting masks

TEST(RcnnPasteMask, OnesFillExactlyThePixelsCentredInTheBox) {
  // Box (2.3, 1.5, 7.6, 5.5) in a 10 x 8 image: centres x + 0.5 in [2.3, 7.6) -> x = 2..7;
  // y + 0.5 in [1.5, 5.5) -> y = 1..4 (5.5 itself is out: half-open).
  const int H = 8, W = 10, m = 4;
  const std::vector<float> ones(m * m, 1.0f);
  const float box[4] = {2.3f, 1.5f, 7.6f, 5.5f};
  std::vector<uint8_t> out(H * W, 7);
  paste_mask(ones.data(), m, box, H, W, 0.5f, out.data());
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      EXPECT_EQ(out[y * W + x], (x >= 2 && x <= 7 && y >= 1 && y <= 4) ? 1 : 0) << y << "," << x;
}

TEST(RcnnPasteMask, HalfGridsGiveHalfBoxes) {
  // 4 x 4 grid, columns 0-1 ones. Box (2, 1, 10, 9) in 12 x 12: pixel x samples the grid at
  // gx = (x - 2)/2 - 0.25; x = 5 -> 1.25 (0.75 of column 1: 1), x = 6 -> 1.75 (0.25: 0). So x 2..5.
  const int m = 4;
  std::vector<float> left(m * m, 0.0f), right(m * m, 0.0f);
  for (int y = 0; y < m; ++y)
    for (int x = 0; x < m; ++x) (x < 2 ? left : right)[y * m + x] = 1.0f;
  {
    const float box[4] = {2, 1, 10, 9};
    std::vector<uint8_t> out(144);
    paste_mask(left.data(), m, box, 12, 12, 0.5f, out.data());
    for (int y = 0; y < 12; ++y)
      for (int x = 0; x < 12; ++x)
        EXPECT_EQ(out[y * 12 + x], (x >= 2 && x <= 5 && y >= 1 && y <= 8) ? 1 : 0) << y << "," << x;
  }
  {
    // Box (-4, 0, 4, 8) in 8 x 8, its left half outside the image; the right-half grid lands on
    // x = 0..3 (gx = (x + 4)/2 - 0.25 >= 1.75 reads >= 0.75).
    const float box[4] = {-4, 0, 4, 8};
    std::vector<uint8_t> out(64);
    paste_mask(right.data(), m, box, 8, 8, 0.5f, out.data());
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) EXPECT_EQ(out[y * 8 + x], x <= 3 ? 1 : 0) << y << "," << x;
    paste_mask(left.data(), m, box, 8, 8, 0.5f, out.data());  // the left-half grid falls off the image
    EXPECT_EQ(std::count(out.begin(), out.end(), 1), 0);
  }
}
