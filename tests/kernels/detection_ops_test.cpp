// The detection ops (ssd, maskrcnn) on the CPU: SSD target assignment, the multibox loss, SSD
// post-processing, sorted-box NMS and RoIAlign. Small cases whose answer is known by hand (the
// coordinates are dyadic, so the IoUs and offsets are exact), and the gradients of the loss and of
// RoIAlign against central differences (grad_check.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

constexpr float kJunk = 777.0f;  // what an overwritten output starts as

Arena make_arena(size_t floats) {
  Arena a;
  arena_init(a, (floats + 64) * sizeof(float));
  return a;
}

// A prior (cx, cy, w, h) from its corners.
std::vector<float> prior_of(float x1, float y1, float x2, float y2) {
  return {0.5f * (x1 + x2), 0.5f * (y1 + y2), x2 - x1, y2 - y1};
}
void append(std::vector<float>& v, const std::vector<float>& more) { v.insert(v.end(), more.begin(), more.end()); }

// ================================ SSD target assignment ================================

struct Assigned {
  std::vector<int32_t> labels;
  std::vector<float> loc;
};

Assigned assign(const std::vector<float>& priors, const std::vector<float>& gts, const std::vector<int32_t>& gt_labels,
                const std::vector<int32_t>& gt_first, float threshold = 0.5f) {
  const int P = int(priors.size() / 4), n = int(gt_first.size()) - 1;
  Assigned a{std::vector<int32_t>(size_t(n) * P, 99), std::vector<float>(size_t(n) * P * 4, kJunk)};
  Arena arena = make_arena(ssd_assign_scratch_floats(P, int(gt_labels.size())));
  ssd_assign_targets(priors.data(), P, gts.data(), gt_labels.data(), gt_first.data(), n, threshold, 0.1f, 0.2f,
                     a.labels.data(), a.loc.data(), arena);
  return a;
}

TEST(SsdAssign, PriorExactlyOnAGtEncodesZero) {
  std::vector<float> priors = prior_of(0.375f, 0.375f, 0.625f, 0.625f);
  append(priors, prior_of(0.0f, 0.0f, 0.125f, 0.125f));  // far away: background
  const auto a = assign(priors, {0.375f, 0.375f, 0.625f, 0.625f}, {4}, {0, 1});
  EXPECT_EQ(a.labels, (std::vector<int32_t>{4, 0}));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(a.loc[j], 0.0f) << j;
}

// Priors (corners): P0 on gt A; P1 overlaps A with IoU 0.6; P2 overlaps B with IoU 1/3 only, B's best;
// P3 overlaps nothing.
const std::vector<float> kGtA{0.125f, 0.125f, 0.375f, 0.375f}, kGtB{0.625f, 0.625f, 0.875f, 0.875f};
std::vector<float> four_priors() {
  std::vector<float> p = prior_of(0.125f, 0.125f, 0.375f, 0.375f);
  append(p, prior_of(0.1875f, 0.125f, 0.4375f, 0.375f));
  append(p, prior_of(0.75f, 0.625f, 1.0f, 0.875f));
  append(p, prior_of(0.0f, 0.75f, 0.125f, 1.0f));
  return p;
}

TEST(SsdAssign, ThresholdMatchesAndAGtBelowThresholdStillGetsItsBestPrior) {
  std::vector<float> gts = kGtA;
  append(gts, kGtB);
  const auto a = assign(four_priors(), gts, {3, 5}, {0, 2});
  EXPECT_EQ(a.labels, (std::vector<int32_t>{3, 3, 5, 0}));
  // P1 -> A: centres 0.3125 -> 0.25, same size: (-0.0625 / (0.25 * 0.1)) = -2.5.
  const std::vector<float> want{0, 0, 0, 0, -2.5f, 0, 0, 0, -5.0f, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < 16; ++j) EXPECT_NEAR(a.loc[j], want[j], 1e-6) << j;
  // At threshold 0.6 exactly P1 still matches (IoU >= threshold); above it, not.
  EXPECT_EQ(assign(four_priors(), gts, {3, 5}, {0, 2}, 0.6f).labels[1], 3);
  EXPECT_EQ(assign(four_priors(), gts, {3, 5}, {0, 2}, 0.61f).labels[1], 0);
}

TEST(SsdAssign, BestPriorForcingBeatsABetterIouAndTheLaterGtWins) {
  // Gt C overlaps only P1 (IoU 0.2): P1 is forced to C although its best gt is A (IoU 0.6).
  std::vector<float> gts = kGtA;
  append(gts, {0.375f, 0.125f, 0.5f, 0.375f});
  auto a = assign(four_priors(), gts, {3, 7}, {0, 2});
  EXPECT_EQ(a.labels, (std::vector<int32_t>{3, 7, 0, 0}));
  EXPECT_NEAR(a.loc[4], (0.4375 - 0.3125) / 0.025, 1e-5);
  EXPECT_NEAR(a.loc[6], std::log(0.5) / 0.2, 1e-6);
  // Gts D1 (on P0) and D2 (P0's lower 3/4): both force P0, the later (D2) wins.
  gts = kGtA;
  append(gts, {0.125f, 0.125f, 0.375f, 0.3125f});
  a = assign(four_priors(), gts, {2, 4}, {0, 2});
  EXPECT_EQ(a.labels[0], 4);
  EXPECT_NEAR(a.loc[1], (0.21875 - 0.25) / 0.025, 1e-5);
  EXPECT_NEAR(a.loc[3], std::log(0.75) / 0.2, 1e-6);
  EXPECT_EQ(a.labels[1], 2);  // P1's best is D1 (IoU 0.6), above the threshold
}

TEST(SsdAssign, ImagesOwnTheirGtsAndAnImageWithoutGtsIsBackground) {
  std::vector<float> gts = kGtA;
  append(gts, kGtB);
  const auto a = assign(four_priors(), gts, {3, 5}, {0, 1, 1, 2});  // image 1 has no gt
  EXPECT_EQ(a.labels, (std::vector<int32_t>{3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0}));
  for (int j = 16; j < 32; ++j) EXPECT_EQ(a.loc[j], 0.0f);
}

// ================================ SSD multibox loss ================================

struct LossOut {
  double loss;
  int pos;
  std::vector<float> dconf, dloc;
};

LossOut run_loss(const std::vector<float>& conf, const std::vector<float>& loc, const std::vector<int32_t>& labels,
                 const std::vector<float>& t, int n, int classes, float grad_scale = 1.0f, float ratio = 3.0f) {
  const int P = int(labels.size()) / n;
  LossOut o{0.0, -1, std::vector<float>(conf.size(), kJunk), std::vector<float>(loc.size(), kJunk)};
  Arena arena = make_arena(ssd_loss_scratch_floats(n, P));
  ssd_multibox_loss(conf.data(), loc.data(), labels.data(), t.data(), n, P, classes, ratio, grad_scale, o.dconf.data(),
                    o.dloc.data(), &o.loss, &o.pos, arena);
  return o;
}

double lse(const std::vector<float>& z, size_t row, int C) {
  double s = 0.0;
  for (int c = 0; c < C; ++c) s += std::exp(double(z[row * C + c]));
  return std::log(s);
}

bool row_is_zero(const std::vector<float>& v, size_t row, int width) {
  for (int c = 0; c < width; ++c)
    if (v[row * width + c] != 0.0f) return false;
  return true;
}

TEST(SsdLoss, OneImageByHandWithThreeHardNegativesPerPositive) {
  // P = 8, C = 3; prior 2 positive (label 1), the rest negatives with background CE
  // log(1 + 2 e^(-b)) for background logit b: distinct b give distinct losses.
  const int P = 8, C = 3;
  const std::vector<float> bg{0.0f, 2.0f, 0.0f, -1.0f, 3.0f, -3.0f, 1.0f, -2.0f};
  std::vector<float> conf;
  for (int p = 0; p < P; ++p) append(conf, {bg[p], 0.0f, 0.0f});
  conf[2 * C + 1] = 1.5f;  // the positive's logits (0, 1.5, 0)
  std::vector<int32_t> labels(P, 0);
  labels[2] = 1;
  std::vector<float> loc(P * 4, 0.0f), t(P * 4, 0.0f);
  const std::vector<float> d{0.5f, -2.0f, 0.0f, 1.5f};  // smooth-L1: 0.125 + 1.5 + 0 + 1.0
  for (int j = 0; j < 4; ++j) loc[2 * 4 + j] = 0.25f + d[j], t[2 * 4 + j] = 0.25f;
  const auto o = run_loss(conf, loc, labels, t, 1, C);
  // The hardest negatives: background logits -3 (prior 5), -2 (7), -1 (3).
  const double want =
      2.625 + (lse(conf, 2, C) - 1.5) + (lse(conf, 5, C) + 3.0) + (lse(conf, 7, C) + 2.0) + (lse(conf, 3, C) + 1.0);
  EXPECT_NEAR(o.loss, want, 1e-6);
  EXPECT_EQ(o.pos, 1);
  for (int p = 0; p < P; ++p) {
    const bool used = p == 2 || p == 5 || p == 7 || p == 3;
    EXPECT_EQ(row_is_zero(o.dconf, p, C), !used) << "prior " << p;
    EXPECT_EQ(row_is_zero(o.dloc, p, 4), p != 2) << "prior " << p;
  }
  // dconf of a used row: softmax - onehot; dloc: clipped difference.
  for (int c = 0; c < C; ++c)
    EXPECT_NEAR(o.dconf[5 * C + c], std::exp(conf[5 * C + c] - lse(conf, 5, C)) - (c == 0), 1e-6);
  const std::vector<float> want_dloc{0.5f, -1.0f, 0.0f, 1.0f};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(o.dloc[2 * 4 + j], want_dloc[j], 1e-7);
  // grad_scale scales both gradients; the loss is unchanged.
  const auto o2 = run_loss(conf, loc, labels, t, 1, C, 0.5f);
  EXPECT_EQ(o2.loss, o.loss);
  for (size_t i = 0; i < o.dconf.size(); ++i) EXPECT_FLOAT_EQ(o2.dconf[i], 0.5f * o.dconf[i]);
  for (size_t i = 0; i < o.dloc.size(); ++i) EXPECT_FLOAT_EQ(o2.dloc[i], 0.5f * o.dloc[i]);
}

TEST(SsdLoss, TiedNegativesGoToTheLowerPriorIndex) {
  // P = 8: prior 7 positive; negatives 0..6 identical except prior 4, the hardest. 3 are mined:
  // prior 4, then the tied priors 0 and 1.
  const int P = 8, C = 2;
  std::vector<float> conf;
  for (int p = 0; p < P; ++p) append(conf, {0.5f, -0.5f});
  conf[4 * C] = -2.0f;
  conf[7 * C + 1] = 2.0f;
  std::vector<int32_t> labels(P, 0);
  labels[7] = 1;
  const std::vector<float> loc(P * 4, 0.0f);
  const auto o = run_loss(conf, loc, labels, loc, 1, C);
  for (int p = 0; p < P; ++p) EXPECT_EQ(row_is_zero(o.dconf, p, C), !(p == 0 || p == 1 || p == 4 || p == 7)) << p;
}

TEST(SsdLoss, NegativesAreCappedAtThoseThereAre) {
  // 3 positives of 5 priors: 9 wanted, 2 exist: every prior counts.
  const int P = 5, C = 3;
  const auto conf = random_vec(P * C, 31);
  const std::vector<int32_t> labels{1, 0, 2, 0, 1};
  const std::vector<float> loc(P * 4, 0.0f);
  const auto o = run_loss(conf, loc, labels, loc, 1, C);
  double want = 0.0;
  for (int p = 0; p < P; ++p) want += lse(conf, p, C) - conf[p * C + labels[p]];
  EXPECT_NEAR(o.loss, want / 3.0, 1e-6);
  for (int p = 0; p < P; ++p) EXPECT_FALSE(row_is_zero(o.dconf, p, C));
}

TEST(SsdLoss, AnImageWithoutPositivesAddsNothingAndGetsZeroGradients) {
  const int P = 6, C = 4;
  const auto conf = random_vec(2 * P * C, 41), loc = random_vec(2 * P * 4, 42), t = random_vec(2 * P * 4, 43);
  std::vector<int32_t> labels(2 * P, 0);
  auto o = run_loss(conf, loc, labels, t, 2, C);
  EXPECT_EQ(o.loss, 0.0);
  EXPECT_EQ(o.pos, 0);
  for (float g : o.dconf) EXPECT_EQ(g, 0.0f);
  for (float g : o.dloc) EXPECT_EQ(g, 0.0f);
  // Image 1 gets one positive: the sum is image 1's loss alone, image 0's gradients stay zero.
  labels[P + 2] = 3;
  o = run_loss(conf, loc, labels, t, 2, C);
  const std::vector<float> conf1(conf.begin() + P * C, conf.end()), loc1(loc.begin() + P * 4, loc.end()),
      t1(t.begin() + P * 4, t.end());
  const std::vector<int32_t> labels1(labels.begin() + P, labels.end());
  const auto o1 = run_loss(conf1, loc1, labels1, t1, 1, C);
  EXPECT_GT(o1.loss, 0.0);
  EXPECT_EQ(o.loss, o1.loss);
  EXPECT_EQ(o.pos, 1);
  for (int i = 0; i < P * C; ++i) EXPECT_EQ(o.dconf[i], 0.0f);
  for (int i = 0; i < P * 4; ++i) EXPECT_EQ(o.dloc[i], 0.0f);
  for (int i = 0; i < P * C; ++i) EXPECT_EQ(o.dconf[P * C + i], o1.dconf[i]);
}

TEST(SsdLoss, GradientsMatchFiniteDifferencesWithTheMiningFixed) {
  // 2 images, 12 priors, 4 classes. Negatives' background logits are spaced 0.4 apart (plus noise
  // of +-0.05 on the other logits), so their ranking survives the 1e-3 perturbations; the offsets
  // loc - t stay 0.15 away from smooth-L1's kink at |d| = 1.
  const int n = 2, P = 12, C = 4;
  auto conf = random_vec(n * P * C, 51, -0.05f, 0.05f);
  auto loc = random_vec(n * P * 4, 52, -0.85f, 0.85f);
  const auto t = random_vec(n * P * 4, 53, -0.5f, 0.5f);
  std::vector<int32_t> labels(n * P, 0);
  labels[1] = 2, labels[6] = 1, labels[P + 3] = 3, labels[P + 4] = 1, labels[P + 10] = 2;
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < P; ++p) {
      const int e = i * P + p;
      conf[e * C] += -0.4f * float((p * 5 + i * 3) % P);  // a permutation of 0..11 per image
      if (labels[e] > 0) conf[e * C + labels[e]] += 1.0f;
    }
  for (size_t j = 0; j < loc.size(); ++j)  // d = loc - t: |d| < 0.85 or 1.15 < |d| < 2
    loc[j] = t[j] + (j % 3 != 0 ? loc[j] : (loc[j] > 0 ? 1.15f + loc[j] : -1.15f + loc[j]));
  Arena arena = make_arena(ssd_loss_scratch_floats(n, P));
  auto loss = [&] {
    double sum = 0.0;
    ssd_multibox_loss(conf.data(), loc.data(), labels.data(), t.data(), n, P, C, 3.0f, 1.0f, nullptr, nullptr, &sum,
                      nullptr, arena);
    return sum;
  };
  std::vector<float> dconf(conf.size(), kJunk), dloc(loc.size(), kJunk);
  int pos = 0;
  double l = 0.0;
  ssd_multibox_loss(conf.data(), loc.data(), labels.data(), t.data(), n, P, C, 3.0f, 1.0f, dconf.data(), dloc.data(),
                    &l, &pos, arena);
  EXPECT_EQ(l, loss());
  EXPECT_EQ(pos, 5);
  size_t zero_rows = 0;
  for (int e = 0; e < n * P; ++e) zero_rows += row_is_zero(dconf, e, C);
  EXPECT_EQ(zero_rows, size_t(n * P - 5 - 5 * 3)) << "3 negatives per positive are mined";
  expect_grad_close("dconf", loss, conf.data(), conf.size(), dconf.data(), 1e-3, 1e-2, 1e-4, 200);
  expect_grad_close("dloc", loss, loc.data(), loc.size(), dloc.data(), 1e-3, 1e-2, 1e-4, 200);
}

// ================================ SSD post-processing ================================

// Priors side by side (no overlap): prior i at x in [i/8, i/8 + 1/16], y in [0.25, 0.3125].
std::vector<float> row_priors(int P) {
  std::vector<float> p;
  for (int i = 0; i < P; ++i) append(p, prior_of(float(i) / 8, 0.25f, float(i) / 8 + 0.0625f, 0.3125f));
  return p;
}

struct Detections {
  std::vector<float> boxes, scores;
  std::vector<int32_t> classes, count;
};

Detections detect(const std::vector<float>& conf, const std::vector<float>& loc, const std::vector<float>& priors,
                  int n, int C, float threshold, float nms_iou, int topk, int max_dets) {
  const int P = int(priors.size() / 4);
  Detections d{std::vector<float>(size_t(n) * max_dets * 4, kJunk), std::vector<float>(size_t(n) * max_dets, kJunk),
               std::vector<int32_t>(size_t(n) * max_dets, 99), std::vector<int32_t>(n, 99)};
  Arena arena = make_arena(ssd_detect_scratch_floats(n, P, C, topk));
  ssd_detect(conf.data(), loc.data(), priors.data(), n, P, C, 0.1f, 0.2f, threshold, nms_iou, topk, max_dets,
             d.boxes.data(), d.scores.data(), d.classes.data(), d.count.data(), arena);
  return d;
}

// Logits (C = 3) whose scores tie across priors (equal rows) and across classes (p0, p2: s1 = s2).
// With the threshold 0.08: class 1 has p1 = p5 > p0 = p2, class 2 p3 > p0 = p2.
std::vector<float> tie_logits() {
  return {0, 2,  2,     // p0: s1 = s2 = e^2 / (1 + 2 e^2) = 0.468
          0, 3,  0,     // p1: s1 = e^3 / (2 + e^3) = 0.909, s2 = 0.045
          0, 2,  2,     // p2: as p0
          0, 0,  2.5f,  // p3: s2 = 0.859, s1 = 0.071
          0, -5, -5,    // p4: below the threshold
          0, 3,  0};    // p5: as p1
}

TEST(SsdDetect, TopDetectionsAreOrderedByScoreThenClassThenPrior) {
  const int P = 6, C = 3;
  const auto priors = row_priors(P);
  const std::vector<float> loc(P * 4, 0.0f);  // boxes = priors
  const auto d = detect(tie_logits(), loc, priors, 1, C, 0.08f, 0.5f, 100, 7);
  const double hi = std::exp(3.0) / (2 + std::exp(3.0)), mid = std::exp(2.0) / (1 + 2 * std::exp(2.0));
  const double p3 = std::exp(2.5) / (2 + std::exp(2.5));
  EXPECT_EQ(d.count[0], 7);
  EXPECT_EQ(d.classes, (std::vector<int32_t>{1, 1, 2, 1, 1, 2, 2}));
  const std::vector<int> prior_of_det{1, 5, 3, 0, 2, 0, 2};
  const std::vector<double> score{hi, hi, p3, mid, mid, mid, mid};
  for (int r = 0; r < 7; ++r) {
    EXPECT_NEAR(d.scores[r], score[r], 1e-6) << r;
    const int p = prior_of_det[r];
    EXPECT_EQ(d.boxes[r * 4 + 0], float(p) / 8) << r;
    EXPECT_EQ(d.boxes[r * 4 + 1], 0.25f) << r;
    EXPECT_EQ(d.boxes[r * 4 + 2], float(p) / 8 + 0.0625f) << r;
    EXPECT_EQ(d.boxes[r * 4 + 3], 0.3125f) << r;
  }
  EXPECT_EQ(d.scores[3], d.scores[5]) << "p0's two classes tie exactly";
  // max_dets cuts the tied scores after class 1's.
  const auto d5 = detect(tie_logits(), loc, priors, 1, C, 0.08f, 0.5f, 100, 5);
  EXPECT_EQ(d5.count[0], 5);
  EXPECT_EQ(d5.classes, (std::vector<int32_t>{1, 1, 2, 1, 1}));
  EXPECT_EQ(d5.boxes, std::vector<float>(d.boxes.begin(), d.boxes.begin() + 20));
}

TEST(SsdDetect, PreNmsTopkKeepsTheLowerPriorOnTiesAndZeroesThePadding) {
  const int P = 6, C = 3;
  const std::vector<float> loc(P * 4, 0.0f);
  const auto d = detect(tie_logits(), loc, row_priors(P), 1, C, 0.08f, 0.5f, 2, 7);
  EXPECT_EQ(d.count[0], 4);
  EXPECT_EQ(d.classes, (std::vector<int32_t>{1, 1, 2, 2, 0, 0, 0}));
  const std::vector<int> prior_of_det{1, 5, 3, 0};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(d.boxes[r * 4], float(prior_of_det[r]) / 8) << r;
  for (int r = 4; r < 7; ++r) {
    EXPECT_EQ(d.scores[r], 0.0f);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(d.boxes[r * 4 + j], 0.0f);
  }
}

TEST(SsdDetect, NmsIsPerClassAndAnIouAtTheThresholdKeepsBoth) {
  // Priors: p0 [0, 0, 0.5, 0.5]; p1 [0, 0, 0.5, 0.25] (IoU with p0 exactly 0.5); p2 [0, 0, 0.5, 0.375]
  // (IoU 0.75 with p0). Class 1 scores p0 > p1 > p2; class 2 only p2.
  std::vector<float> priors = prior_of(0, 0, 0.5f, 0.5f);
  append(priors, prior_of(0, 0, 0.5f, 0.25f));
  append(priors, prior_of(0, 0, 0.5f, 0.375f));
  const std::vector<float> conf{0, 4, 0, 0, 3, 0, 0, 2, 2.5f};
  const std::vector<float> loc(3 * 4, 0.0f);
  const auto d = detect(conf, loc, priors, 1, 3, 0.2f, 0.5f, 10, 5);
  EXPECT_EQ(d.count[0], 3);
  EXPECT_EQ(d.classes, (std::vector<int32_t>{1, 1, 2, 0, 0}));
  EXPECT_EQ(d.boxes[1 * 4 + 3], 0.25f) << "p1 survives (IoU 0.5 does not suppress)";
  EXPECT_EQ(d.boxes[2 * 4 + 3], 0.375f) << "p2 survives in class 2";
  // Images are independent: the same image twice gives the same detections twice.
  std::vector<float> conf2 = conf, loc2 = loc;
  append(conf2, conf);
  append(loc2, loc);
  const auto d2 = detect(conf2, loc2, priors, 2, 3, 0.2f, 0.5f, 10, 5);
  EXPECT_EQ(d2.count, (std::vector<int32_t>{3, 3}));
  for (int j = 0; j < 20; ++j) EXPECT_EQ(d2.boxes[20 + j], d.boxes[j]);
}

TEST(SsdDetect, DecodingInvertsTheAssignmentEncoding) {
  // One gt per image; every prior it is assigned to gets the gt's class with a high score, the
  // others background. The top detection is the gt box again (the duplicates are suppressed).
  const int P = 64, C = 4, n = 3;
  std::vector<float> priors;
  for (int i = 0; i < P; ++i) {
    const float cx = (float(i % 8) + 0.5f) / 8, cy = (float(i / 8) + 0.5f) / 8, s = 0.15f + 0.05f * float(i % 3);
    append(priors, {cx, cy, s, s * (i % 2 ? 1.5f : 1.0f)});
  }
  const std::vector<float> gts{0.1f, 0.2f, 0.37f, 0.41f, 0.52f, 0.33f, 0.91f, 0.64f, 0.05f, 0.6f, 0.3f, 0.95f};
  const std::vector<int32_t> gt_labels{1, 3, 2};
  const auto a = assign(priors, gts, gt_labels, {0, 1, 2, 3});
  std::vector<float> conf(size_t(n) * P * C, 0.0f);
  for (int e = 0; e < n * P; ++e) conf[size_t(e) * C + a.labels[e]] = 8.0f;
  const auto d = detect(conf, a.loc, priors, n, C, 0.5f, 0.5f, 200, 10);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(d.count[i], 1) << "image " << i;
    EXPECT_EQ(d.classes[i * 10], gt_labels[i]);
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(d.boxes[i * 40 + j], gts[i * 4 + j], 1e-6) << "image " << i << " " << j;
  }
}

// ================================ NMS of sorted boxes ================================

std::vector<int32_t> run_nms(const std::vector<float>& boxes, float threshold, int max_keep, int* count) {
  const int n = int(boxes.size() / 4);
  std::vector<int32_t> keep(std::max(max_keep, 0), -1);
  Arena arena = make_arena(nms_scratch_floats(n));
  *count = nms_sorted(boxes.data(), n, threshold, max_keep, keep.data(), arena);
  keep.resize(std::max(*count, 0));
  return keep;
}

TEST(Nms, HandMadeSetWithAnIouExactlyAtTheThreshold) {
  const std::vector<float> boxes{
      0, 0,    2, 1,     // b0
      0, 0,    1, 1,     // b1: IoU(b0) = 1/2 exactly: kept at 0.5
      0, 0,    2, 1.5f,  // b2: IoU(b0) = 2/3: suppressed
      0, 0,    1, 1,     // b3: IoU(b1) = 1: suppressed
      5, 5,    6, 6,     // b4: apart
      0, 0.5f, 2, 1.75f  // b5: IoU(b2) = 4/7, but b2 is suppressed; IoU(b0) = 2/7, IoU(b1) = 1/6
  };
  int count = 0;
  EXPECT_EQ(run_nms(boxes, 0.5f, 10, &count), (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(count, 4);
  EXPECT_EQ(run_nms(boxes, 0.49f, 10, &count), (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(run_nms(boxes, 0.5f, 2, &count), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(count, 2);
  EXPECT_EQ(run_nms(boxes, 0.5f, 0, &count), (std::vector<int32_t>{}));
  EXPECT_EQ(run_nms({}, 0.5f, 5, &count), (std::vector<int32_t>{}));
}

// ================================ RoIAlign ================================

struct RoiCase {
  int n, h, w, c, pooled_h, pooled_w;
  float scale;
  int sampling;
  bool aligned;
};

std::vector<float> roi_forward(const RoiCase& k, const std::vector<float>& x, const std::vector<float>& rois) {
  const int R = int(rois.size() / 5);
  std::vector<float> y(size_t(R) * k.pooled_h * k.pooled_w * k.c, kJunk);
  roi_align_forward(x.data(), k.n, k.h, k.w, k.c, rois.data(), R, k.pooled_h, k.pooled_w, k.scale, k.sampling,
                    k.aligned, y.data());
  return y;
}

TEST(RoiAlign, ConstantMapGivesTheConstantAndZeroFarOutside) {
  const RoiCase k{2, 5, 6, 3, 2, 2, 0.5f, 0, false};
  const std::vector<float> x(size_t(k.n) * k.h * k.w * k.c, 3.0f);
  // RoI 0 inside image 1; RoI 1 (image 0) reaching 4 pixels left and above the map: samples in
  // [-1, 0) still read the edge, those below -1 read 0.
  const std::vector<float> rois{1, 1, 1, 9, 7, 0, -8, -8, 2, 2};
  for (bool aligned : {false, true}) {
    RoiCase ka = k;
    ka.aligned = aligned;
    const auto y = roi_forward(ka, x, rois);
    for (int j = 0; j < 12; ++j) EXPECT_NEAR(y[j], 3.0f, 2e-6) << j;
    // RoI 1: [-4, 1] (aligned: -4.5 .. 0.5) per side, 2x2 bins of 2.5 px, ceil(2.5) = 3 samples a
    // side. Bin 0 samples at -4+{5/12, 15/12, 25/12} (aligned: 0.5 lower): all below -1, so 0.
    // Bin 1: -1.5 + {5, 15, 25}/12 = -1.083, -0.25, 0.583: 2 inside (aligned: -1.58, -0.75, 0.08: 2).
    const std::vector<float> want_side{0.0f, 2.0f / 3.0f};
    for (int ph = 0; ph < 2; ++ph)
      for (int pw = 0; pw < 2; ++pw)
        for (int ch = 0; ch < 3; ++ch)
          EXPECT_NEAR(y[12 + (ph * 2 + pw) * 3 + ch], 3.0f * want_side[ph] * want_side[pw], 2e-6)
              << "aligned " << aligned << " bin " << ph << "," << pw;
  }
}

TEST(RoiAlign, LinearRampGivesTheBinCentres) {
  // f(b, y, x, ch) = 0.5 x + 0.25 y + ch + 10 b is reproduced exactly by bilinear sampling, and
  // a bin's samples average to its centre: y = f(centre), whatever the sampling.
  const RoiCase k{2, 8, 8, 2, 2, 2, 0.5f, 0, false};
  std::vector<float> x(size_t(k.n) * k.h * k.w * k.c);
  for (int b = 0; b < k.n; ++b)
    for (int yy = 0; yy < k.h; ++yy)
      for (int xx = 0; xx < k.w; ++xx)
        for (int ch = 0; ch < k.c; ++ch)
          x[((size_t(b) * k.h + yy) * k.w + xx) * k.c + ch] = 0.5f * xx + 0.25f * yy + float(ch) + 10.0f * b;
  const std::vector<float> rois{1, 2, 4, 10, 12};  // image 1, x in [1, 5], y in [2, 6] after scale
  for (bool aligned : {false, true})
    for (int sampling : {0, 1, 2, 3}) {
      RoiCase ka = k;
      ka.aligned = aligned, ka.sampling = sampling;
      const auto y = roi_forward(ka, x, rois);
      const float shift = aligned ? 0.5f : 0.0f;
      for (int ph = 0; ph < 2; ++ph)
        for (int pw = 0; pw < 2; ++pw)
          for (int ch = 0; ch < 2; ++ch) {
            const float cy = 2.0f - shift + 2.0f * ph + 1.0f, cx = 1.0f - shift + 2.0f * pw + 1.0f;
            EXPECT_NEAR(y[(ph * 2 + pw) * 2 + ch], 0.5f * cx + 0.25f * cy + ch + 10.0f, 1e-5)
                << "aligned " << aligned << " sampling " << sampling;
          }
    }
}

TEST(RoiAlign, SamplingRatioAndAlignmentOnAQuadratic) {
  // f = x^2 on an 8-wide map, one 1x1 bin over x in [0, 6], y in [0, 1].
  //   sampling 0 -> ceil(6) = 6 samples at x = k + 0.5: mean of (k^2 + (k+1)^2) / 2 = 73 / 6;
  //   sampling 2 -> x = 1.5, 4.5: (2.5 + 20.5) / 2 = 11.5;
  //   aligned: shifted by -0.5 -> x = 0..5, mean of k^2 = 55 / 6.
  const RoiCase k{1, 2, 8, 1, 1, 1, 1.0f, 0, false};
  std::vector<float> x(16);
  for (int yy = 0; yy < 2; ++yy)
    for (int xx = 0; xx < 8; ++xx) x[yy * 8 + xx] = float(xx * xx);
  const std::vector<float> rois{0, 0, 0, 6, 1};
  RoiCase kk = k;
  EXPECT_NEAR(roi_forward(kk, x, rois)[0], 73.0 / 6.0, 1e-5);
  kk.sampling = 2;
  EXPECT_NEAR(roi_forward(kk, x, rois)[0], 11.5, 1e-5);
  kk.sampling = 0, kk.aligned = true;
  EXPECT_NEAR(roi_forward(kk, x, rois)[0], 55.0 / 6.0, 1e-5);
  // aligned=false makes an RoI at least 1 pixel: a zero-width RoI at x = 2 samples x = 2.5 (6.5);
  // aligned=true keeps it empty: no sample (0 samples a side) and the output 0.
  const std::vector<float> thin{0, 2, 0, 2, 1};
  kk.aligned = false;
  EXPECT_NEAR(roi_forward(kk, x, thin)[0], 6.5, 1e-5);
  kk.aligned = true;
  EXPECT_EQ(roi_forward(kk, x, thin)[0], 0.0f);
}

void PrintTo(const RoiCase& k, std::ostream* os) {
  *os << "n=" << k.n << " h=" << k.h << " w=" << k.w << " c=" << k.c << " pooled=" << k.pooled_h << "x" << k.pooled_w
      << " scale=" << k.scale << " sampling=" << k.sampling << " aligned=" << k.aligned;
}

class RoiAlignGrad : public ::testing::TestWithParam<RoiCase> {};

// loss = sum y * r: dx = roi_align_backward(r) (accumulated onto a prefilled dx).
TEST_P(RoiAlignGrad, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const RoiCase k = GetParam();
  auto x = random_vec(size_t(k.n) * k.h * k.w * k.c, 61);
  // RoIs in input pixels (1 / scale per feature pixel), some reaching outside the map.
  const float W = float(k.w) / k.scale, H = float(k.h) / k.scale;
  const auto u = random_vec(6 * 4, 62, 0.0f, 1.0f);
  std::vector<float> rois;
  for (int r = 0; r < 6; ++r) {
    const float x1 = -0.2f * W + 1.1f * W * u[r * 4], y1 = -0.2f * H + 1.1f * H * u[r * 4 + 1];
    append(rois, {float(r % k.n), x1, y1, x1 + 0.7f * W * u[r * 4 + 2], y1 + 0.7f * H * u[r * 4 + 3]});
  }
  const size_t ny = size_t(6) * k.pooled_h * k.pooled_w * k.c;
  const auto rw = random_vec(ny, 63);
  auto loss = [&] {
    const auto y = roi_forward(k, x, rois);
    return dot(y.data(), rw.data(), ny);
  };
  const auto dx0 = random_vec(x.size(), 64);
  std::vector<float> dx = dx0;
  roi_align_backward(rw.data(), k.n, k.h, k.w, k.c, rois.data(), 6, k.pooled_h, k.pooled_w, k.scale, k.sampling,
                     k.aligned, dx.data());
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];
  // y is linear in x: a large step costs no truncation error and shrinks the rounding's share.
  expect_grad_close("dx", loss, x.data(), x.size(), dx.data(), 0.25, 1e-3, 1e-4, 300);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RoiAlignGrad,
                         ::testing::Values(RoiCase{2, 7, 9, 3, 2, 2, 0.25f, 0, false},    // Detectron v1
                                           RoiCase{1, 6, 5, 4, 3, 2, 0.5f, 2, true},      // aligned, fixed grid
                                           RoiCase{3, 10, 8, 5, 7, 7, 0.125f, 0, true}),  // Mask R-CNN bins
                         [](const ::testing::TestParamInfo<RoiCase>& i) {
                           const RoiCase& c = i.param;
                           return std::string(c.aligned ? "aligned" : "detectron") + "_s" + std::to_string(c.sampling) +
                                  "_p" + std::to_string(c.pooled_h) + std::to_string(c.pooled_w);
                         });

// ================================ Nearest 2x upsampling (FPN) ================================
TEST(UpsampleNearest2x, EveryOutputIsItsSourcePixelAndTheBackwardIsTheAdjointAndAccumulates) {
  const int n = 2, h = 3, w = 5, c = 3;
  std::vector<float> x(size_t(n) * h * w * c);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 7.0f;
  std::vector<float> y(x.size() * 4, -99.0f);
  upsample_nearest2x_forward(x.data(), n, h, w, c, y.data());
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < 2 * h; ++i)
      for (int j = 0; j < 2 * w; ++j)
        for (int k = 0; k < c; ++k)
          ASSERT_EQ(y[((size_t(b) * 2 * h + i) * 2 * w + j) * c + k], x[((size_t(b) * h + i / 2) * w + j / 2) * c + k])
              << b << " " << i << " " << j << " " << k;
  // <up(x), dy> == <x, up^T(dy)>, and the backward adds to what dx held.
  std::vector<float> dy(y.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = float((i * 37) % 11) - 5.0f;
  std::vector<float> dx(x.size(), 1.0f);
  upsample_nearest2x_backward(dy.data(), n, h, w, c, dx.data());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < y.size(); ++i) lhs += double(y[i]) * dy[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += double(x[i]) * (dx[i] - 1.0f);
  EXPECT_NEAR(lhs, rhs, 1e-6 * std::fabs(lhs) + 1e-6);
  // One entry by hand: dx[0, 1, 2, 1] = 1 + dy over rows 2..3, columns 4..5, channel 1.
  double want = 1.0;
  for (int i = 2; i < 4; ++i)
    for (int j = 4; j < 6; ++j) want += dy[(size_t(i) * 2 * w + j) * c + 1];
  EXPECT_FLOAT_EQ(dx[(size_t(1) * w + 2) * c + 1], float(want));
}

}  // namespace
