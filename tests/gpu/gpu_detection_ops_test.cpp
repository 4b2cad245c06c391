// The CUDA detection ops (ssd, maskrcnn) against the CPU ones, through the op tables, on the same
// random inputs. The decisions must be the same: SSD labels, the mined negatives (seen through which
// dconf rows are zero), detection classes and counts, NMS keep lists, RPN proposal counts and
// scores are compared exactly; the values within tolerance. Both devices compute IoU in float unfused and softmax / decoding in double
// rounded once (kernels/op_signatures.inc), so they agree bit for bit up to CUDA's and glibc's exp
// differing by an ulp in double; loc targets, boxes and scores 1e-6 relative, the loss 1e-9
// relative (double sums in different orders), dconf/dloc 1e-6, RoIAlign forward 1e-5 (fused
// multiply-adds on the GPU), backward 1e-4 (atomic adds in any order).
// Inputs include exact ties (duplicated priors, gts and logit rows) so that the tie rules are met
// on the device. Each op is also rerun to the same bits (RoIAlign's atomic backward excepted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

constexpr float kJunk = 777.0f;

::testing::AssertionResult close_scaled(const std::string& what, const std::vector<float>& got,
                                        const std::vector<float>& want, double rel, double abs_frac) {
  double mx = 0.0;
  for (float w : want)
    if (std::fabs(w) != kJunk) mx = std::max(mx, double(std::fabs(w)));
  return all_close(what, got, want, rel, std::max(1e-30, abs_frac * mx));
}

template <typename T>
::testing::AssertionResult same_values(const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << what << ": first difference at [" << i << "]: got " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

Arena cpu_scratch(size_t floats) { return host_arena((floats + 64) * sizeof(float)); }
Arena gpu_scratch(size_t floats) { return device_arena((floats + 64) * sizeof(float)); }

// Priors (cx, cy, w, h) in [0, 1], every 7th a copy of the one before (exact IoU ties).
std::vector<float> random_priors(int P, uint64_t stream) {
  const auto u = random_floats(size_t(P) * 4, stream, 0.0f, 1.0f);
  std::vector<float> p(size_t(P) * 4);
  for (int i = 0; i < P; ++i) {
    const int src = i % 7 == 6 ? i - 1 : i;
    p[size_t(i) * 4 + 0] = 0.05f + 0.9f * u[size_t(src) * 4 + 0];
    p[size_t(i) * 4 + 1] = 0.05f + 0.9f * u[size_t(src) * 4 + 1];
    p[size_t(i) * 4 + 2] = 0.05f + 0.45f * u[size_t(src) * 4 + 2];
    p[size_t(i) * 4 + 3] = 0.05f + 0.45f * u[size_t(src) * 4 + 3];
  }
  return p;
}

// Logit rows: random, or (tied) each row one of 5 random templates.
std::vector<float> random_logits(int rows, int C, uint64_t stream, float scale, bool tied) {
  auto z = random_floats(size_t(rows) * C, stream, -scale, scale);
  if (tied) {
    const auto pick = random_indices(rows, stream + 1, 5);
    for (int r = 0; r < rows; ++r) std::copy_n(z.begin() + size_t(pick[r]) * C, C, z.begin() + size_t(r) * C);
  }
  return z;
}

// ================================ SSD target assignment ================================
struct AssignCase {
  int n, priors, max_gts;
};
void PrintTo(const AssignCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " priors=", c.priors, " max_gts=", c.max_gts);
}

class SsdAssignGpu : public GpuTestWithParam<AssignCase> {};

TEST_P(SsdAssignGpu, MatchesCpu) {
  const AssignCase k = GetParam();
  const int P = k.priors, C = 21;
  const auto priors = random_priors(P, 100);
  // Image i has (i * 7) % (max_gts + 1) gts (image 0 none); in each image gt 1 copies gt 0.
  std::vector<int32_t> first{0}, labels;
  std::vector<float> gts;
  for (int i = 0; i < k.n; ++i) {
    const int g = (i * 7) % (k.max_gts + 1);
    const auto u = random_floats(size_t(g) * 4, 200 + i, 0.0f, 1.0f);
    const auto l = random_indices(g, 300 + i, C - 1);
    for (int j = 0; j < g; ++j) {
      const int s = j == 1 ? 0 : j;
      const float x1 = 0.9f * u[s * 4], y1 = 0.9f * u[s * 4 + 1];
      gts.insert(gts.end(), {x1, y1, std::min(1.0f, x1 + 0.02f + 0.5f * u[s * 4 + 2]),
                             std::min(1.0f, y1 + 0.02f + 0.5f * u[s * 4 + 3])});
      labels.push_back(1 + l[s]);
    }
    first.push_back(int32_t(labels.size()));
  }
  const int G = int(labels.size());
  std::vector<int32_t> lab(size_t(k.n) * P, 99);
  std::vector<float> loc(size_t(k.n) * P * 4, kJunk);
  Arena ca = cpu_scratch(cpu().ssd_assign_scratch_floats(P, G));
  cpu().ssd_assign_targets(priors.data(), P, gts.data(), labels.data(), first.data(), k.n, 0.5f, 0.1f, 0.2f, lab.data(),
                           loc.data(), ca);
  const DeviceBuffer<float> gpriors(priors), ggts(gts.empty() ? std::vector<float>{0} : gts);
  const DeviceBuffer<int32_t> glabels(labels.empty() ? std::vector<int32_t>{0} : labels), gfirst(first);
  Arena ga = gpu_scratch(gpu().ssd_assign_scratch_floats(P, G));
  std::vector<int32_t> runs_lab[2];
  std::vector<float> runs_loc[2];
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<int32_t> glab(std::vector<int32_t>(lab.size(), 99));
    DeviceBuffer<float> gloc(std::vector<float>(loc.size(), kJunk));
    gpu().ssd_assign_targets(gpriors.get(), P, ggts.get(), glabels.get(), gfirst.get(), k.n, 0.5f, 0.1f, 0.2f,
                             glab.get(), gloc.get(), ga);
    runs_lab[r] = glab.download();
    runs_loc[r] = gloc.download();
  }
  EXPECT_TRUE(same_values("ssd_assign_targets labels", runs_lab[0], lab));
  EXPECT_TRUE(all_close("ssd_assign_targets loc_targets", runs_loc[0], loc, 1e-6, 1e-6));
  EXPECT_TRUE(same_bits("ssd_assign_targets labels, rerun", runs_lab[1], runs_lab[0]));
  EXPECT_TRUE(same_bits("ssd_assign_targets loc_targets, rerun", runs_loc[1], runs_loc[0]));
  size_t matched = 0;
  for (int32_t l : lab) matched += l > 0;
  EXPECT_GT(matched, size_t(0)) << "the case matches something";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdAssignGpu,
                         ::testing::Values(AssignCase{3, 50, 4},      // small, an image without gts
                                           AssignCase{8, 846, 12},    // ssd_mini's priors
                                           AssignCase{4, 8732, 40}),  // ssd300's priors, many gts
                         [](const ::testing::TestParamInfo<AssignCase>& i) {
                           return cat("n", i.param.n, "_p", i.param.priors, "_g", i.param.max_gts);
                         });

// ================================ SSD multibox loss ================================
struct LossCase {
  int n, priors, classes;
  bool tied;
};
void PrintTo(const LossCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " priors=", c.priors, " classes=", c.classes, " tied=", c.tied);
}

class SsdLossGpu : public GpuTestWithParam<LossCase> {};

TEST_P(SsdLossGpu, MatchesCpu) {
  const LossCase k = GetParam();
  const int P = k.priors, C = k.classes;
  const size_t NP = size_t(k.n) * P;
  const auto conf = random_logits(int(NP), C, 400, 3.0f, k.tied);
  const auto loc = random_floats(NP * 4, 402, -2.0f, 2.0f), t = random_floats(NP * 4, 403, -2.0f, 2.0f);
  // About 1 prior in 20 positive; image 1 has none.
  const auto draw = random_indices(NP, 404, 20 * (C - 1));
  std::vector<int32_t> labels(NP);
  for (size_t e = 0; e < NP; ++e) labels[e] = draw[e] < C - 1 && e / P != 1 ? 1 + draw[e] : 0;
  std::vector<float> dconf(conf.size(), kJunk), dloc(loc.size(), kJunk);
  int pos = -1;
  Arena ca = cpu_scratch(cpu().ssd_loss_scratch_floats(k.n, P));
  double loss = 0.0;
  cpu().ssd_multibox_loss(conf.data(), loc.data(), labels.data(), t.data(), k.n, P, C, 3.0f, 0.5f, dconf.data(),
                          dloc.data(), &loss, &pos, ca);
  ASSERT_GT(pos, 0);
  const DeviceBuffer<float> gconf(conf), gloc(loc), gt(t);
  const DeviceBuffer<int32_t> glabels(labels);
  Arena ga = gpu_scratch(gpu().ssd_loss_scratch_floats(k.n, P));
  double runs_loss[2];
  std::vector<float> runs_dconf[2], runs_dloc[2];
  DeviceLossSum gloss;
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gdconf(std::vector<float>(dconf.size(), kJunk)), gdloc(std::vector<float>(dloc.size(), kJunk));
    int gpos = -1;
    gloss.zero();
    gpu().ssd_multibox_loss(gconf.get(), gloc.get(), glabels.get(), gt.get(), k.n, P, C, 3.0f, 0.5f, gdconf.get(),
                            gdloc.get(), gloss.get(), &gpos, ga);
    runs_loss[r] = gloss.read();
    EXPECT_EQ(gpos, pos);
    runs_dconf[r] = gdconf.download();
    runs_dloc[r] = gdloc.download();
  }
  EXPECT_TRUE(scalar_close("ssd_multibox_loss", runs_loss[0], loss, 1e-9, 0.0));
  EXPECT_TRUE(close_scaled("ssd_multibox_loss dconf", runs_dconf[0], dconf, 1e-6, 1e-7));
  EXPECT_TRUE(close_scaled("ssd_multibox_loss dloc", runs_dloc[0], dloc, 1e-6, 1e-7));
  // The same priors mined: zero rows of dconf at the same places.
  size_t differ = 0, used = 0;
  for (size_t e = 0; e < NP; ++e) {
    bool zc = true, zg = true;
    for (int c = 0; c < C; ++c) zc = zc && dconf[e * C + c] == 0.0f, zg = zg && runs_dconf[0][e * C + c] == 0.0f;
    differ += zc != zg;
    used += !zc;
  }
  EXPECT_EQ(differ, size_t(0)) << "priors used on one device only";
  EXPECT_EQ(used, size_t(pos) * 4) << "3 negatives per positive (enough negatives in every image)";
  EXPECT_EQ(runs_loss[1], runs_loss[0]);
  EXPECT_TRUE(same_bits("ssd_multibox_loss dconf, rerun", runs_dconf[1], runs_dconf[0]));
  EXPECT_TRUE(same_bits("ssd_multibox_loss dloc, rerun", runs_dloc[1], runs_dloc[0]));
  // Forward only: the same loss.
  int fpos = -1;
  gloss.zero();
  gpu().ssd_multibox_loss(gconf.get(), gloc.get(), glabels.get(), gt.get(), k.n, P, C, 3.0f, 0.5f, nullptr, nullptr,
                          gloss.get(), &fpos, ga);
  EXPECT_EQ(gloss.read(), runs_loss[0]);
  EXPECT_EQ(fpos, pos);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdLossGpu,
                         ::testing::Values(LossCase{3, 200, 5, false},    // small
                                           LossCase{4, 846, 11, true},    // ssd_mini, tied rows
                                           LossCase{2, 8732, 81, false},  // ssd300
                                           LossCase{8, 8732, 81, true}),  // ssd300, tied rows
                         [](const ::testing::TestParamInfo<LossCase>& i) {
                           return cat("n", i.param.n, "_p", i.param.priors, "_c", i.param.classes,
                                      i.param.tied ? "_tied" : "");
                         });

// ================================ SSD post-processing ================================
struct DetectCase {
  int n, priors, classes, topk, max_dets;
  float threshold;
  bool tied;
};
void PrintTo(const DetectCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " priors=", c.priors, " classes=", c.classes, " topk=", c.topk, " max_dets=", c.max_dets,
             " threshold=", c.threshold, " tied=", c.tied);
}

class SsdDetectGpu : public GpuTestWithParam<DetectCase> {};

TEST_P(SsdDetectGpu, MatchesCpu) {
  const DetectCase k = GetParam();
  const int P = k.priors, C = k.classes, D = k.max_dets;
  const size_t NP = size_t(k.n) * P;
  const auto priors = random_priors(P, 500);
  const auto conf = random_logits(int(NP), C, 501, 4.0f, k.tied);
  auto loc = random_floats(NP * 4, 503, -1.0f, 1.0f);
  if (k.tied)  // a copied prior with the same offsets: the same box
    for (size_t e = 0; e < NP; ++e)
      if (e % size_t(P) % 7 == 6) std::copy_n(loc.begin() + (e - 1) * 4, 4, loc.begin() + e * 4);
  std::vector<float> boxes(size_t(k.n) * D * 4, kJunk), scores(size_t(k.n) * D, kJunk);
  std::vector<int32_t> classes(size_t(k.n) * D, 99), count(k.n, 99);
  Arena ca = cpu_scratch(cpu().ssd_detect_scratch_floats(k.n, P, C, k.topk));
  cpu().ssd_detect(conf.data(), loc.data(), priors.data(), k.n, P, C, 0.1f, 0.2f, k.threshold, 0.5f, k.topk, D,
                   boxes.data(), scores.data(), classes.data(), count.data(), ca);
  const DeviceBuffer<float> gconf(conf), gloc(loc), gpriors(priors);
  Arena ga = gpu_scratch(gpu().ssd_detect_scratch_floats(k.n, P, C, k.topk));
  std::vector<float> rb[2], rs[2];
  std::vector<int32_t> rc[2], rn[2];
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gb(std::vector<float>(boxes.size(), kJunk)), gs(std::vector<float>(scores.size(), kJunk));
    DeviceBuffer<int32_t> gc(std::vector<int32_t>(classes.size(), 99)), gn(std::vector<int32_t>(count.size(), 99));
    gpu().ssd_detect(gconf.get(), gloc.get(), gpriors.get(), k.n, P, C, 0.1f, 0.2f, k.threshold, 0.5f, k.topk, D,
                     gb.get(), gs.get(), gc.get(), gn.get(), ga);
    rb[r] = gb.download();
    rs[r] = gs.download();
    rc[r] = gc.download();
    rn[r] = gn.download();
  }
  EXPECT_TRUE(same_values("ssd_detect det_count", rn[0], count));
  EXPECT_TRUE(same_values("ssd_detect det_classes", rc[0], classes));
  EXPECT_TRUE(all_close("ssd_detect det_boxes", rb[0], boxes, 1e-6, 1e-7));
  EXPECT_TRUE(all_close("ssd_detect det_scores", rs[0], scores, 1e-6, 1e-7));
  EXPECT_TRUE(same_bits("ssd_detect det_boxes, rerun", rb[1], rb[0]));
  EXPECT_TRUE(same_bits("ssd_detect det_scores, rerun", rs[1], rs[0]));
  EXPECT_TRUE(same_bits("ssd_detect det_classes, rerun", rc[1], rc[0]));
  int total = 0;
  for (int32_t c : count) total += c;
  EXPECT_GT(total, 0) << "the case detects something";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdDetectGpu,
                         ::testing::Values(DetectCase{2, 300, 5, 50, 40, 0.05f, false},      // small
                                           DetectCase{3, 846, 11, 200, 100, 0.05f, true},    // ssd_mini, ties
                                           DetectCase{2, 846, 11, 1000, 500, 0.01f, false},  // top-k above P
                                           DetectCase{4, 846, 11, 200, 100, 0.8f, false},    // fewer than max_dets
                                           DetectCase{4, 8732, 81, 200, 200, 0.05f, false},  // ssd300 eval
                                           DetectCase{2, 8732, 81, 200, 200, 0.05f, true}),  // ssd300, ties
                         [](const ::testing::TestParamInfo<DetectCase>& i) {
                           const DetectCase& c = i.param;
                           return cat("n", c.n, "_p", c.priors, "_c", c.classes, "_k", c.topk, "_d", c.max_dets,
                                      c.tied ? "_tied" : "");
                         });

// ================================ NMS of sorted boxes ================================
struct NmsCase {
  int n, max_keep;
  float threshold;
};
void PrintTo(const NmsCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " max_keep=", c.max_keep, " threshold=", c.threshold);
}

class NmsGpu : public GpuTestWithParam<NmsCase> {};

TEST_P(NmsGpu, KeepsTheSameBoxesAsTheCpu) {
  const NmsCase k = GetParam();
  // Boxes in a 200-pixel square, 5 to 40 a side; every 9th a copy of the one before, every 11th
  // the left half of the one before (IoU exactly 0.5).
  const auto u = random_floats(size_t(k.n) * 4, 600, 0.0f, 1.0f);
  std::vector<float> boxes(size_t(k.n) * 4);
  for (int i = 0; i < k.n; ++i) {
    float* b = boxes.data() + size_t(i) * 4;
    if (i > 0 && i % 9 == 0) {
      std::copy_n(b - 4, 4, b);
    } else if (i > 0 && i % 11 == 0) {
      std::copy_n(b - 4, 4, b);
      b[2] = 0.5f * (b[0] + b[2]);
    } else {
      b[0] = 200.0f * u[size_t(i) * 4], b[1] = 200.0f * u[size_t(i) * 4 + 1];
      b[2] = b[0] + 5.0f + 35.0f * u[size_t(i) * 4 + 2], b[3] = b[1] + 5.0f + 35.0f * u[size_t(i) * 4 + 3];
    }
  }
  std::vector<int32_t> keep(k.max_keep, -1);
  Arena ca = cpu_scratch(cpu().nms_scratch_floats(k.n));
  const int count = cpu().nms_sorted(boxes.data(), k.n, k.threshold, k.max_keep, keep.data(), ca);
  keep.resize(count);
  const DeviceBuffer<float> gboxes(boxes);
  Arena ga = gpu_scratch(gpu().nms_scratch_floats(k.n));
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<int32_t> gkeep(std::vector<int32_t>(k.max_keep, -1));
    const int gcount = gpu().nms_sorted(gboxes.get(), k.n, k.threshold, k.max_keep, gkeep.get(), ga);
    EXPECT_EQ(gcount, count);
    auto got = gkeep.download();
    EXPECT_TRUE(std::all_of(got.begin() + std::min(gcount, k.max_keep), got.end(), [](int32_t v) { return v == -1; }))
        << "nothing written past the count";
    got.resize(std::max(0, std::min(gcount, k.max_keep)));
    EXPECT_TRUE(same_values("nms_sorted keep", got, keep));
  }
  EXPECT_GT(k.n - count, 0) << "the case suppresses something";
}

INSTANTIATE_TEST_SUITE_P(Shapes, NmsGpu,
                         ::testing::Values(NmsCase{100, 100, 0.5f},      // fewer than two 64-box words
                                           NmsCase{2000, 2000, 0.7f},    // Mask R-CNN's RPN (test)
                                           NmsCase{6000, 1000, 0.5f},    // max_keep reached
                                           NmsCase{12000, 2000, 0.7f}),  // RPN pre-NMS top-k (train)
                         [](const ::testing::TestParamInfo<NmsCase>& i) {
                           return cat("n", i.param.n, "_keep", i.param.max_keep, "_t",
                                      int(std::lround(i.param.threshold * 10)));
                         });

// ================================ Mask R-CNN's RPN: proposals and loss ================================
struct RpnCase {
  int n;
  std::vector<int> level_cells;  // anchors per level (cells x 3 ratios)
  int pre, post;
  float min_size;
};
void PrintTo(const RpnCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " levels=", c.level_cells.size(), " pre=", c.pre, " post=", c.post, " min_size=", c.min_size);
}

// Anchors in a 320 x 320 image, 8 to 200 pixels a side, every 13th a copy of the one before; the
// level bounds; objectness with every 17th value repeated (exact ties); small deltas.
struct RpnInputs {
  std::vector<float> anchors, objectness, deltas;
  std::vector<int32_t> level_first{0};
  int A = 0;
};
RpnInputs rpn_inputs(const RpnCase& k) {
  RpnInputs in;
  for (int cells : k.level_cells) in.level_first.push_back(in.level_first.back() + cells * 3);
  in.A = in.level_first.back();
  const auto u = random_floats(size_t(in.A) * 4, 900, 0.0f, 1.0f);
  in.anchors.resize(size_t(in.A) * 4);
  for (int a = 0; a < in.A; ++a) {
    float* b = in.anchors.data() + size_t(a) * 4;
    if (a % 13 == 12) {
      std::copy_n(b - 4, 4, b);
      continue;
    }
    const float w = 8.0f + 192.0f * u[size_t(a) * 4 + 2], h = 8.0f + 192.0f * u[size_t(a) * 4 + 3];
    b[0] = -40.0f + 360.0f * u[size_t(a) * 4] - 0.5f * w, b[1] = -40.0f + 360.0f * u[size_t(a) * 4 + 1] - 0.5f * h;
    b[2] = b[0] + w, b[3] = b[1] + h;
  }
  in.objectness = random_floats(size_t(k.n) * in.A, 901, -6.0f, 6.0f);
  for (size_t e = 17; e < in.objectness.size(); e += 17) in.objectness[e] = in.objectness[e - 1];
  // Each level's best anchor's score given to the next level's first anchor: a tie across levels,
  // which the merge breaks by the lower level.
  for (int i = 0; i < k.n; ++i)
    for (size_t l = 1; l + 1 < in.level_first.size(); ++l) {
      float* obj = in.objectness.data() + size_t(i) * in.A;
      const float best = *std::max_element(obj + in.level_first[l - 1], obj + in.level_first[l]);
      obj[in.level_first[l]] = best;
    }
  in.deltas = random_floats(size_t(k.n) * in.A * 4, 902, -0.4f, 0.4f);
  return in;
}

class RpnProposalsGpu : public GpuTestWithParam<RpnCase> {};

TEST_P(RpnProposalsGpu, MatchesCpu) {
  const RpnCase k = GetParam();
  const RpnInputs in = rpn_inputs(k);
  const int L = static_cast<int>(k.level_cells.size()), P = k.post;
  std::vector<float> boxes(size_t(k.n) * P * 4, kJunk), scores(size_t(k.n) * P, kJunk);
  std::vector<int32_t> count(size_t(k.n), 99);
  Arena ca = cpu_scratch(cpu().rpn_proposals_scratch_floats(k.n, in.A, L, k.pre, P));
  cpu().rpn_proposals(in.objectness.data(), in.deltas.data(), in.anchors.data(), k.n, in.A, in.level_first.data(), L,
                      320, 320, k.pre, P, 0.7f, k.min_size, boxes.data(), scores.data(), count.data(), ca);
  const DeviceBuffer<float> gobj(in.objectness), gdel(in.deltas), ganchors(in.anchors);
  Arena ga = gpu_scratch(gpu().rpn_proposals_scratch_floats(k.n, in.A, L, k.pre, P));
  std::vector<float> rb[2], rs[2];
  std::vector<int32_t> rn[2];
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gb(std::vector<float>(boxes.size(), kJunk)), gs(std::vector<float>(scores.size(), kJunk));
    DeviceBuffer<int32_t> gn(std::vector<int32_t>(count.size(), 99));
    gpu().rpn_proposals(gobj.get(), gdel.get(), ganchors.get(), k.n, in.A, in.level_first.data(), L, 320, 320, k.pre,
                        P, 0.7f, k.min_size, gb.get(), gs.get(), gn.get(), ga);
    rb[r] = gb.download();
    rs[r] = gs.download();
    rn[r] = gn.download();
  }
  EXPECT_TRUE(same_values("rpn_proposals count", rn[0], count));
  EXPECT_TRUE(same_values("rpn_proposals scores", rs[0], scores));  // the objectness values themselves
  EXPECT_TRUE(all_close("rpn_proposals boxes", rb[0], boxes, 1e-6, 1e-5));
  EXPECT_TRUE(same_bits("rpn_proposals boxes, rerun", rb[1], rb[0]));
  EXPECT_TRUE(same_values("rpn_proposals count, rerun", rn[1], rn[0]));
  EXPECT_TRUE(same_bits("rpn_proposals scores, rerun", rs[1], rs[0]));
  int total = 0;
  for (int32_t c : count) total += c;
  EXPECT_GT(total, 0) << "the case proposes something";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RpnProposalsGpu,
                         ::testing::Values(RpnCase{4, {432}, 1000, 100, 0.0f},      // maskrcnn_mini: 12x12 x 9
                                           RpnCase{16, {432}, 600, 100, 0.0f},      // mini eval, a full batch
                                           RpnCase{3, {300, 75, 20}, 64, 80, 4.0f},  // levels, post binds, min size
                                           RpnCase{2, {40000, 10000, 2500, 625, 169}, 2000, 1000, 0.0f}),  // R-50-FPN
                         [](const ::testing::TestParamInfo<RpnCase>& i) {
                           return cat("n", i.param.n, "_l", i.param.level_cells.size(), "_a",
                                      i.param.level_cells.front() * 3, "_pre", i.param.pre, "_post", i.param.post);
                         });

class RpnLossGpu : public GpuTestWithParam<RpnCase> {};

TEST_P(RpnLossGpu, MatchesCpu) {
  const RpnCase k = GetParam();
  const RpnInputs in = rpn_inputs(k);
  // Image i samples min(256, A) distinct anchors (a stride through them), a third of them positive;
  // the last image samples nothing.
  std::vector<int32_t> index, sample_first{0}, positive_first{0};
  for (int i = 0; i < k.n; ++i) {
    const int count = i + 1 == k.n ? 0 : std::min(256, in.A), stride = std::max(1, in.A / std::max(count, 1));
    for (int s = 0; s < count; ++s) index.push_back((s * stride + i) % in.A);
    if (count > 3) index.back() = index[index.size() - 2];  // one anchor sampled twice: its gradient adds twice
    sample_first.push_back(static_cast<int32_t>(index.size()));
    positive_first.push_back(positive_first.back() + count / 3);
  }
  const auto targets = random_floats(size_t(positive_first.back()) * 4 + 4, 903, -0.6f, 0.6f);
  const size_t NA = size_t(k.n) * in.A;
  std::vector<float> dobj(NA, kJunk), ddel(NA * 4, kJunk);
  double parts[2] = {0.0, 0.0};
  Arena ca = cpu_scratch(cpu().rpn_loss_scratch_floats(k.n));
  cpu().rpn_loss_batch(in.objectness.data(), in.deltas.data(), k.n, in.A, index.data(), sample_first.data(),
                       positive_first.data(), targets.data(), 0.25f, dobj.data(), ddel.data(), parts, ca);
  const double cls = parts[0], box = parts[1], loss = parts[0] + parts[1];
  const DeviceBuffer<float> gobj(in.objectness), gdel(in.deltas), gtargets(targets);
  const DeviceBuffer<int32_t> gindex(index.empty() ? std::vector<int32_t>{0} : index), gsf(sample_first),
      gpf(positive_first);
  Arena ga = gpu_scratch(gpu().rpn_loss_scratch_floats(k.n));
  std::vector<float> rdobj[2], rddel[2];
  double rloss[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gdobj(std::vector<float>(NA, kJunk)), gddel(std::vector<float>(NA * 4, kJunk));
    DeviceLossSum gparts(2);
    gpu().rpn_loss_batch(gobj.get(), gdel.get(), k.n, in.A, gindex.get(), gsf.get(), gpf.get(), gtargets.get(), 0.25f,
                         gdobj.get(), gddel.get(), gparts.get(), ga);
    const std::vector<double> got = gparts.parts();
    const double gcls = got[0], gbox = got[1];
    rloss[r] = gcls + gbox;
    EXPECT_TRUE(scalar_close("rpn_loss_batch cls", gcls, cls, 1e-9, 1e-12));
    EXPECT_TRUE(scalar_close("rpn_loss_batch box", gbox, box, 1e-9, 1e-12));
    rdobj[r] = gdobj.download();
    rddel[r] = gddel.download();
  }
  EXPECT_TRUE(scalar_close("rpn_loss_batch total", rloss[0], loss, 1e-9, 1e-12));
  EXPECT_EQ(rloss[1], rloss[0]) << "a rerun gives the same bits";
  EXPECT_TRUE(all_close("rpn_loss_batch dobjectness", rdobj[0], dobj, 1e-6, 1e-9));
  EXPECT_TRUE(all_close("rpn_loss_batch ddeltas", rddel[0], ddel, 1e-6, 1e-9));
  EXPECT_TRUE(same_bits("rpn_loss_batch dobjectness, rerun", rdobj[1], rdobj[0]));
  EXPECT_TRUE(same_bits("rpn_loss_batch ddeltas, rerun", rddel[1], rddel[0]));
  EXPECT_GT(cls, 0.0);
  EXPECT_GT(box, 0.0);
  // An anchor past the image's: the CPU op throws; the device's, which cannot stop the host, makes
  // both parts NaN (and the trainer stops a run whose loss is not finite).
  std::vector<int32_t> bad = index;
  bad[0] = in.A;
  EXPECT_ANY_THROW(cpu().rpn_loss_batch(in.objectness.data(), in.deltas.data(), k.n, in.A, bad.data(),
                                        sample_first.data(), positive_first.data(), targets.data(), 0.25f, dobj.data(),
                                        ddel.data(), parts, ca));
  const DeviceBuffer<int32_t> gbad(bad);
  DeviceBuffer<float> gdobj(std::vector<float>(NA, kJunk)), gddel(std::vector<float>(NA * 4, kJunk));
  DeviceLossSum gparts(2);
  gpu().rpn_loss_batch(gobj.get(), gdel.get(), k.n, in.A, gbad.get(), gsf.get(), gpf.get(), gtargets.get(), 0.25f,
                       gdobj.get(), gddel.get(), gparts.get(), ga);
  const std::vector<double> flagged = gparts.parts();
  EXPECT_TRUE(std::isnan(flagged[0]) && std::isnan(flagged[1])) << flagged[0] << " " << flagged[1];
}

INSTANTIATE_TEST_SUITE_P(Shapes, RpnLossGpu,
                         ::testing::Values(RpnCase{4, {432}, 0, 0, 0.0f}, RpnCase{16, {432}, 0, 0, 0.0f},
                                           RpnCase{2, {40000, 10000, 2500, 625, 169}, 0, 0, 0.0f}),
                         [](const ::testing::TestParamInfo<RpnCase>& i) {
                           return cat("n", i.param.n, "_a", i.param.level_cells.front() * 3);
                         });

struct BoxLossCase {
  int n, rows, classes;
  bool box_only;
};
void PrintTo(const BoxLossCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " rows=", c.rows, " classes=", c.classes, " box_only=", c.box_only);
}

class RcnnBoxLossGpu : public GpuTestWithParam<BoxLossCase> {};

TEST_P(RcnnBoxLossGpu, MatchesCpu) {
  const BoxLossCase k = GetParam();
  // Image i has rows - i RoIs (the last none), a quarter of them foreground with labels 1..C-1.
  std::vector<int32_t> labels, row_first{0}, fg_first{0};
  const auto u = random_indices(size_t(k.n) * k.rows, 904, k.classes - 1);
  for (int i = 0; i < k.n; ++i) {
    const int rows = i + 1 == k.n ? 0 : k.rows - i, fg = rows / 4;
    for (int r = 0; r < rows; ++r) labels.push_back(r < fg ? 1 + u[size_t(i) * k.rows + r] : (r % 5 == 0 ? 0 : u[r]));
    row_first.push_back(static_cast<int32_t>(labels.size()));
    fg_first.push_back(fg_first.back() + fg);
  }
  const int R = row_first.back(), C = k.classes;
  const auto logits = random_floats(size_t(R) * C, 905, -5.0f, 5.0f);
  const auto deltas = random_floats(size_t(R) * C * 4, 906, -2.0f, 2.0f);
  const auto targets = random_floats(size_t(fg_first.back()) * 4 + 4, 907, -2.0f, 2.0f);
  std::vector<float> dcls(size_t(R) * C, kJunk), dbox(size_t(R) * C * 4, kJunk);
  double parts[2] = {0.0, 0.0};
  Arena ca = cpu_scratch(cpu().rcnn_box_loss_scratch_floats(k.n));
  cpu().rcnn_box_loss(k.box_only ? nullptr : logits.data(), deltas.data(), k.n, C, labels.data(), row_first.data(),
                      fg_first.data(), targets.data(), 0.25f, k.box_only ? nullptr : dcls.data(), dbox.data(), parts,
                      ca);
  const double cls = parts[0], box = parts[1], loss = parts[0] + parts[1];
  const DeviceBuffer<float> glogits(logits), gdeltas(deltas), gtargets(targets);
  const DeviceBuffer<int32_t> glabels(labels), grf(row_first), gff(fg_first);
  Arena ga = gpu_scratch(gpu().rcnn_box_loss_scratch_floats(k.n));
  std::vector<float> rdcls[2], rdbox[2];
  double rloss[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gdcls(std::vector<float>(dcls.size(), kJunk)), gdbox(std::vector<float>(dbox.size(), kJunk));
    DeviceLossSum gparts(2);
    gpu().rcnn_box_loss(k.box_only ? nullptr : glogits.get(), gdeltas.get(), k.n, C, glabels.get(), grf.get(),
                        gff.get(), gtargets.get(), 0.25f, k.box_only ? nullptr : gdcls.get(), gdbox.get(),
                        gparts.get(), ga);
    const std::vector<double> got = gparts.parts();
    const double gcls = got[0], gbox = got[1];
    rloss[r] = gcls + gbox;
    EXPECT_TRUE(scalar_close("rcnn_box_loss cls", gcls, cls, 1e-9, 1e-12));
    EXPECT_TRUE(scalar_close("rcnn_box_loss box", gbox, box, 1e-9, 1e-12));
    rdcls[r] = gdcls.download();
    rdbox[r] = gdbox.download();
  }
  EXPECT_TRUE(scalar_close("rcnn_box_loss total", rloss[0], loss, 1e-9, 1e-12));
  EXPECT_EQ(rloss[1], rloss[0]) << "a rerun gives the same bits";
  EXPECT_TRUE(all_close("rcnn_box_loss dcls", rdcls[0], dcls, 1e-6, 1e-9));
  EXPECT_TRUE(all_close("rcnn_box_loss dbox", rdbox[0], dbox, 1e-6, 1e-9));
  EXPECT_TRUE(same_bits("rcnn_box_loss dcls, rerun", rdcls[1], rdcls[0]));
  EXPECT_TRUE(same_bits("rcnn_box_loss dbox, rerun", rdbox[1], rdbox[0]));
  EXPECT_GT(box, 0.0);
  if (!k.box_only) {
    EXPECT_GT(cls, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RcnnBoxLossGpu,
                         ::testing::Values(BoxLossCase{16, 64, 11, false},   // maskrcnn_mini: 64 RoIs per image
                                           BoxLossCase{2, 512, 81, false},   // R-50-FPN: 512 per image, COCO
                                           BoxLossCase{3, 300, 81, true}),   // the box part alone
                         [](const ::testing::TestParamInfo<BoxLossCase>& i) {
                           return cat("n", i.param.n, "_r", i.param.rows, "_c", i.param.classes,
                                      i.param.box_only ? "_box_only" : "");
                         });

struct MaskLossCase {
  int n, rows_per_image, mask, classes;
};
void PrintTo(const MaskLossCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " rows=", c.rows_per_image, " mask=", c.mask, " classes=", c.classes);
}

class RcnnMaskLossGpu : public GpuTestWithParam<MaskLossCase> {};

TEST_P(RcnnMaskLossGpu, MatchesCpu) {
  const MaskLossCase k = GetParam();
  const int pixels = k.mask * k.mask, C = k.classes;
  std::vector<int32_t> row_first{0};
  for (int i = 0; i < k.n; ++i) row_first.push_back(row_first.back() + (i == 1 ? 0 : k.rows_per_image - i % 3));
  const int rows = row_first.back();
  const auto labels = random_indices(size_t(rows), 908, C);
  const auto u = random_floats(size_t(rows) * pixels, 909, 0.0f, 1.0f);
  std::vector<uint8_t> targets(u.size());
  for (size_t i = 0; i < u.size(); ++i) targets[i] = u[i] < 0.3f ? 1 : 0;
  const auto logits = random_floats(size_t(rows) * pixels * C, 910, -8.0f, 8.0f);
  std::vector<float> dlogits(logits.size(), kJunk);
  Arena ca = cpu_scratch(cpu().rcnn_mask_loss_scratch_floats(k.n, rows, pixels));
  double loss = 0.0;
  cpu().rcnn_mask_loss(logits.data(), k.n, rows, pixels, C, labels.data(), targets.data(), row_first.data(), 0.25f,
                       dlogits.data(), &loss, ca);
  const DeviceBuffer<float> glogits(logits);
  const DeviceBuffer<int32_t> glabels(labels), grf(row_first);
  const DeviceBuffer<uint8_t> gtargets(targets);
  Arena ga = gpu_scratch(gpu().rcnn_mask_loss_scratch_floats(k.n, rows, pixels));
  std::vector<float> runs[2];
  double rloss[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> gd(std::vector<float>(dlogits.size(), kJunk));
    DeviceLossSum gloss;
    gpu().rcnn_mask_loss(glogits.get(), k.n, rows, pixels, C, glabels.get(), gtargets.get(), grf.get(), 0.25f, gd.get(),
                         gloss.get(), ga);
    rloss[r] = gloss.read();
    runs[r] = gd.download();
  }
  EXPECT_TRUE(scalar_close("rcnn_mask_loss", rloss[0], loss, 1e-6, 1e-12));  // float terms, other sum order
  EXPECT_EQ(rloss[1], rloss[0]) << "a rerun gives the same bits";
  EXPECT_TRUE(all_close("rcnn_mask_loss dlogits", runs[0], dlogits, 1e-5, 1e-9));
  EXPECT_TRUE(same_bits("rcnn_mask_loss dlogits, rerun", runs[1], runs[0]));
  EXPECT_GT(loss, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RcnnMaskLossGpu,
                         ::testing::Values(MaskLossCase{16, 16, 28, 11},   // maskrcnn_mini: 28x28 masks
                                           MaskLossCase{2, 128, 28, 81}),  // R-50-FPN: 128 per image, COCO
                         [](const ::testing::TestParamInfo<MaskLossCase>& i) {
                           return cat("n", i.param.n, "_r", i.param.rows_per_image, "_m", i.param.mask, "_c",
                                      i.param.classes);
                         });

// ============================ RoI sampling and mask targets ============================
struct RoiSampleCase {
  int n, max_proposals, max_gts, batch, per_image, hw;
};
void PrintTo(const RoiSampleCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " max_proposals=", c.max_proposals, " max_gts=", c.max_gts, " batch=", c.batch,
             " per_image=", c.per_image, " hw=", c.hw);
}

// A batch for the sampler: image i has (3 i) % (max_gts + 1) instances (so one has none) with
// labels in 1..10 and elliptic 0/1 masks inside their boxes, and max_proposals - 7 i proposals:
// every third a jittered instance box (foreground), every eleventh an exact copy of one (its IoU
// with the appended ground truth ties at 1), the rest random; the rows past an image's count hold
// junk the ops must not read.
struct SamplerBatch {
  std::vector<float> proposals, gt_boxes;
  std::vector<int32_t> counts, gt_labels, gt_first{0};
  std::vector<uint8_t> masks;
};
SamplerBatch sampler_batch(const RoiSampleCase& k, int32_t bad_label_image = -1) {
  SamplerBatch b;
  const float S = float(k.hw);
  for (int i = 0; i < k.n; ++i) {
    const int G = (3 * i) % (k.max_gts + 1);
    const auto u = random_floats(size_t(G) * 4, 950 + uint64_t(i), 0.0f, 1.0f);
    const auto lab = random_indices(size_t(G), 960 + uint64_t(i), 10);
    for (int g = 0; g < G; ++g) {
      const float x1 = std::floor(0.6f * S * u[size_t(g) * 4]), y1 = std::floor(0.6f * S * u[size_t(g) * 4 + 1]);
      const float w = 4.0f + std::floor(0.35f * S * u[size_t(g) * 4 + 2]),
                  h = 4.0f + std::floor(0.35f * S * u[size_t(g) * 4 + 3]);
      b.gt_boxes.insert(b.gt_boxes.end(), {x1, y1, std::min(x1 + w, S), std::min(y1 + h, S)});
      b.gt_labels.push_back(i == bad_label_image ? 0 : 1 + lab[size_t(g)]);
      const float* box = &b.gt_boxes[b.gt_boxes.size() - 4];
      const float cx = 0.5f * (box[0] + box[2]), cy = 0.5f * (box[1] + box[3]);
      const float ax = 0.5f * (box[2] - box[0]), ay = 0.5f * (box[3] - box[1]);
      for (int y = 0; y < k.hw; ++y)
        for (int x = 0; x < k.hw; ++x) {
          const float dx = (float(x) + 0.5f - cx) / ax, dy = (float(y) + 0.5f - cy) / ay;
          b.masks.push_back(dx * dx + dy * dy <= 1.0f ? 1 : 0);
        }
    }
    b.gt_first.push_back(b.gt_first.back() + G);
    const int P = std::max(k.max_proposals - 7 * i, 0);
    b.counts.push_back(P);
    const auto r = random_floats(size_t(k.max_proposals) * 4, 970 + uint64_t(i), 0.0f, 1.0f);
    const float* gts = b.gt_boxes.data() + size_t(b.gt_first[size_t(i)]) * 4;
    for (int j = 0; j < k.max_proposals; ++j) {
      const float* q = &r[size_t(j) * 4];
      float box[4];
      if (j >= P) {
        std::fill(box, box + 4, kJunk);
      } else if (G > 0 && j % 11 == 0) {
        std::copy(gts + size_t(j % G) * 4, gts + size_t(j % G) * 4 + 4, box);
      } else if (G > 0 && j % 3 == 0) {
        const float* g = gts + size_t(j % G) * 4;
        for (int c = 0; c < 4; ++c) box[c] = std::clamp(g[c] + 4.0f * (q[c] - 0.5f), 0.0f, S);
        if (box[2] <= box[0]) box[2] = std::min(box[0] + 1.0f, S), box[0] = box[2] - 1.0f;
        if (box[3] <= box[1]) box[3] = std::min(box[1] + 1.0f, S), box[1] = box[3] - 1.0f;
      } else {
        box[0] = 0.8f * S * q[0];
        box[1] = 0.8f * S * q[1];
        box[2] = std::min(box[0] + 1.0f + 0.5f * S * q[2], S);
        box[3] = std::min(box[1] + 1.0f + 0.5f * S * q[3], S);
      }
      b.proposals.insert(b.proposals.end(), box, box + 4);
    }
  }
  return b;
}

RoiSampling sampler_spec(int batch) { return RoiSampling{batch, 0.25f, 0.5f, 0.5f, 0.0f, 7, 11, 1000}; }

struct SampleOut {
  std::vector<float> rois, deltas;
  std::vector<int32_t> row_first, fg_first, labels, matched;
};

class RcnnRoiSampleGpu : public GpuTestWithParam<RoiSampleCase> {};

TEST_P(RcnnRoiSampleGpu, SamplesAndMaskTargetsMatchTheCpu) {
  const RoiSampleCase k = GetParam();
  const SamplerBatch b = sampler_batch(k);
  const RoiSampling spec = sampler_spec(k.batch);
  const int R = k.n * k.batch + 3, N1 = k.n + 1;
  SampleOut c{std::vector<float>(size_t(R) * 5, kJunk),
              std::vector<float>(size_t(R) * 4, kJunk),
              std::vector<int32_t>(static_cast<size_t>(N1)),
              std::vector<int32_t>(static_cast<size_t>(N1)),
              std::vector<int32_t>(size_t(R), 7),
              std::vector<int32_t>(size_t(R), 7)};
  Arena ca = cpu_scratch(cpu().rcnn_sample_rois_scratch_floats(k.n, k.max_proposals, k.max_gts));
  cpu().rcnn_sample_rois(spec, b.proposals.data(), b.counts.data(), k.max_proposals, b.gt_boxes.data(),
                         b.gt_labels.data(), b.gt_first.data(), k.n, k.max_gts, R, c.rois.data(), c.row_first.data(),
                         c.fg_first.data(), c.labels.data(), c.matched.data(), c.deltas.data(), ca);
  ASSERT_GT(c.fg_first.back(), 0) << "the batch gives foreground RoIs";
  ASSERT_GT(c.row_first.back() - c.fg_first.back(), 0) << "and background ones";

  const DeviceBuffer<float> gprop(b.proposals), ggt(b.gt_boxes);
  const DeviceBuffer<int32_t> gcount(b.counts), glab(b.gt_labels), gfirst(b.gt_first);
  const DeviceBuffer<uint8_t> gmasks(b.masks);
  Arena ga = gpu_scratch(gpu().rcnn_sample_rois_scratch_floats(k.n, k.max_proposals, k.max_gts));
  const int F = k.n * k.per_image, MM = 7 * 7;
  std::vector<float> cmrois(size_t(F) * 5, kJunk);
  std::vector<int32_t> cmfirst(static_cast<size_t>(N1)), cmlabels(size_t(F), 7);
  std::vector<uint8_t> ctargets(size_t(F) * MM, 9);
  cpu().rcnn_mask_targets(c.rois.data(), c.row_first.data(), c.fg_first.data(), c.labels.data(), c.matched.data(), k.n,
                          k.per_image, b.masks.data(), b.gt_first.data(), k.hw, k.hw, 7, F, cmrois.data(),
                          cmfirst.data(), cmlabels.data(), ctargets.data());
  int ones = 0;
  for (uint8_t t : ctargets) ones += t;
  EXPECT_GT(ones, 0) << "some mask target pixels are 1";
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> rois(std::vector<float>(c.rois.size(), kJunk)),
        deltas(std::vector<float>(c.deltas.size(), kJunk));
    DeviceBuffer<int32_t> rf(static_cast<size_t>(N1)), ff(static_cast<size_t>(N1)),
        labels(std::vector<int32_t>(size_t(R), 7)), matched(std::vector<int32_t>(size_t(R), 7));
    gpu().rcnn_sample_rois(spec, gprop.get(), gcount.get(), k.max_proposals, ggt.get(), glab.get(), gfirst.get(), k.n,
                           k.max_gts, R, rois.get(), rf.get(), ff.get(), labels.get(), matched.get(), deltas.get(), ga);
    EXPECT_TRUE(same_values("row_first", rf.download(), c.row_first));
    EXPECT_TRUE(same_values("fg_first", ff.download(), c.fg_first));
    EXPECT_TRUE(same_values("labels", labels.download(), c.labels));
    EXPECT_TRUE(same_values("matched", matched.download(), c.matched));
    EXPECT_TRUE(same_values("rois", rois.download(), c.rois));
    EXPECT_TRUE(all_close("target deltas", deltas.download(), c.deltas, 1e-6, 1e-7));

    DeviceBuffer<float> mrois(std::vector<float>(cmrois.size(), kJunk));
    DeviceBuffer<int32_t> mfirst(static_cast<size_t>(N1)), mlabels(std::vector<int32_t>(size_t(F), 7));
    DeviceBuffer<uint8_t> targets(std::vector<uint8_t>(ctargets.size(), 9));
    gpu().rcnn_mask_targets(rois.get(), rf.get(), ff.get(), labels.get(), matched.get(), k.n, k.per_image,
                            gmasks.get(), gfirst.get(), k.hw, k.hw, 7, F, mrois.get(), mfirst.get(), mlabels.get(),
                            targets.get());
    EXPECT_TRUE(same_values("mask_first", mfirst.download(), cmfirst));
    EXPECT_TRUE(same_values("mask labels", mlabels.download(), cmlabels));
    EXPECT_TRUE(same_values("mask rois", mrois.download(), cmrois));
    EXPECT_TRUE(same_values("mask targets", targets.download(), ctargets));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RcnnRoiSampleGpu,
                         ::testing::Values(RoiSampleCase{4, 100, 5, 64, 16, 64},      // maskrcnn_mini-like
                                           RoiSampleCase{2, 1000, 20, 512, 128, 96},  // more candidates than a block
                                           RoiSampleCase{3, 40, 3, 64, 4, 32}),  // fewer candidates than the sample
                         [](const ::testing::TestParamInfo<RoiSampleCase>& i) {
                           return cat("n", i.param.n, "_p", i.param.max_proposals, "_b", i.param.batch);
                         });

using GpuDetectionOps = GpuTest;

// A ground-truth label below 1: the CPU op throws; the CUDA op gives that image one row labelled -1
// (which rcnn_box_loss turns into a NaN loss) and the other images their samples.
TEST_F(GpuDetectionOps, RoiSamplerMarksAnImageWithABadLabel) {
  const RoiSampleCase k{3, 60, 4, 32, 8, 32};
  const SamplerBatch b = sampler_batch(k, 1);
  const SamplerBatch good = sampler_batch(k);
  const RoiSampling spec = sampler_spec(k.batch);
  const int R = k.n * k.batch, N1 = k.n + 1;
  std::vector<float> rois(static_cast<size_t>(R) * 5), deltas(static_cast<size_t>(R) * 4);
  std::vector<int32_t> rf(static_cast<size_t>(N1)), ff(static_cast<size_t>(N1)), labels(static_cast<size_t>(R)),
      matched(static_cast<size_t>(R));
  Arena ca = cpu_scratch(0);
  EXPECT_THROW(cpu().rcnn_sample_rois(spec, b.proposals.data(), b.counts.data(), k.max_proposals, b.gt_boxes.data(),
                                      b.gt_labels.data(), b.gt_first.data(), k.n, k.max_gts, R, rois.data(), rf.data(),
                                      ff.data(), labels.data(), matched.data(), deltas.data(), ca),
               std::exception);
  cpu().rcnn_sample_rois(spec, good.proposals.data(), good.counts.data(), k.max_proposals, good.gt_boxes.data(),
                         good.gt_labels.data(), good.gt_first.data(), k.n, k.max_gts, R, rois.data(), rf.data(),
                         ff.data(), labels.data(), matched.data(), deltas.data(), ca);
  const DeviceBuffer<float> gprop(b.proposals), ggt(b.gt_boxes);
  const DeviceBuffer<int32_t> gcount(b.counts), glab(b.gt_labels), gfirst(b.gt_first);
  DeviceBuffer<float> grois(static_cast<size_t>(R) * 5), gdeltas(static_cast<size_t>(R) * 4);
  DeviceBuffer<int32_t> grf(static_cast<size_t>(N1)), gff(static_cast<size_t>(N1)), glabels(static_cast<size_t>(R)),
      gmatched(static_cast<size_t>(R));
  Arena ga = gpu_scratch(gpu().rcnn_sample_rois_scratch_floats(k.n, k.max_proposals, k.max_gts));
  gpu().rcnn_sample_rois(spec, gprop.get(), gcount.get(), k.max_proposals, ggt.get(), glab.get(), gfirst.get(), k.n,
                         k.max_gts, R, grois.get(), grf.get(), gff.get(), glabels.get(), gmatched.get(), gdeltas.get(),
                         ga);
  const std::vector<int32_t> got_rf = grf.download(), got_labels = glabels.download();
  EXPECT_EQ(got_rf[2] - got_rf[1], 1) << "the bad image's one row";
  EXPECT_EQ(got_labels[size_t(got_rf[1])], -1);
  for (int i : {0, 2})
    EXPECT_EQ(got_rf[size_t(i) + 1] - got_rf[size_t(i)], rf[size_t(i) + 1] - rf[size_t(i)]) << "image " << i;
}

// ================================ RoIAlign ================================
struct RoiCase {
  int n, h, w, c, rois, pooled;
  float scale;
  int sampling;
  bool aligned;
};
void PrintTo(const RoiCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " h=", c.h, " w=", c.w, " c=", c.c, " rois=", c.rois, " pooled=", c.pooled, " scale=", c.scale,
             " sampling=", c.sampling, " aligned=", c.aligned);
}

class RoiAlignGpu : public GpuTestWithParam<RoiCase> {};

TEST_P(RoiAlignGpu, ForwardAndBackwardMatchCpu) {
  const RoiCase k = GetParam();
  const auto x = random_floats(size_t(k.n) * k.h * k.w * k.c, 700);
  // RoIs in input pixels, 1 to 60% of the image a side, some reaching outside, one zero-sized.
  const float W = float(k.w) / k.scale, H = float(k.h) / k.scale;
  const auto u = random_floats(size_t(k.rois) * 4, 701, 0.0f, 1.0f);
  const auto img = random_indices(k.rois, 702, k.n);
  std::vector<float> rois;
  for (int r = 0; r < k.rois; ++r) {
    const float x1 = -0.1f * W + 1.0f * W * u[r * 4], y1 = -0.1f * H + 1.0f * H * u[r * 4 + 1];
    const float rw = r == 0 ? 0.0f : (0.01f + 0.6f * u[r * 4 + 2]) * W,
                rh = r == 0 ? 0.0f : (0.01f + 0.6f * u[r * 4 + 3]) * H;
    rois.insert(rois.end(), {float(img[r]), x1, y1, x1 + rw, y1 + rh});
  }
  const size_t ny = size_t(k.rois) * k.pooled * k.pooled * k.c;
  std::vector<float> y(ny, kJunk);
  cpu().roi_align_forward(x.data(), k.n, k.h, k.w, k.c, rois.data(), k.rois, k.pooled, k.pooled, k.scale, k.sampling,
                          k.aligned, y.data());
  const auto dy = random_floats(ny, 703), dx0 = random_floats(x.size(), 704);
  std::vector<float> dx = dx0;
  cpu().roi_align_backward(dy.data(), k.n, k.h, k.w, k.c, rois.data(), k.rois, k.pooled, k.pooled, k.scale, k.sampling,
                           k.aligned, dx.data());
  const DeviceBuffer<float> gx(x), grois(rois), gdy(dy);
  std::vector<float> runs[2];
  for (auto& run : runs) {
    DeviceBuffer<float> gy(std::vector<float>(ny, kJunk));
    gpu().roi_align_forward(gx.get(), k.n, k.h, k.w, k.c, grois.get(), k.rois, k.pooled, k.pooled, k.scale, k.sampling,
                            k.aligned, gy.get());
    run = gy.download();
  }
  EXPECT_TRUE(close_scaled("roi_align_forward", runs[0], y, 1e-5, 1e-6));
  EXPECT_TRUE(same_bits("roi_align_forward, rerun", runs[1], runs[0]));
  DeviceBuffer<float> gdx(dx0);  // accumulated onto
  gpu().roi_align_backward(gdy.get(), k.n, k.h, k.w, k.c, grois.get(), k.rois, k.pooled, k.pooled, k.scale, k.sampling,
                           k.aligned, gdx.get());
  EXPECT_TRUE(close_scaled("roi_align_backward dx", gdx.download(), dx, 1e-4, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RoiAlignGpu,
                         ::testing::Values(RoiCase{1, 6, 5, 3, 4, 2, 1.0f, 2, false},          // tiny, odd sizes
                                           RoiCase{2, 25, 34, 64, 40, 7, 0.125f, 0, false},    // Detectron v1
                                           RoiCase{2, 25, 34, 64, 40, 7, 0.125f, 2, true},     // aligned, fixed grid
                                           RoiCase{2, 50, 68, 256, 64, 14, 0.25f, 2, false},   // mask head
                                           RoiCase{3, 13, 17, 33, 100, 7, 0.0625f, 0, true}),  // many RoIs
                         [](const ::testing::TestParamInfo<RoiCase>& i) {
                           const RoiCase& c = i.param;
                           return cat("n", c.n, "_", c.h, "x", c.w, "x", c.c, "_r", c.rois, "_p", c.pooled, "_s",
                                      c.sampling, c.aligned ? "_aligned" : "");
                         });

// RoIAlign over an FPN's four pooled levels (P2..P5 of a 256 x 192 image): RoIs of every size, so
// that each level pools some, compared with the CPU op; the level choice itself exactly (the RoIs
// whose rows are zero on one device must be zero on the other).
TEST_F(GpuDetectionOps, RoiAlignLevelsMatchesCpu) {
  const int n = 2, c = 16, pooled = 7, R = 120, H = 256, W = 192;
  RoiLevels L;
  L.levels = 4;
  L.finest = 2;
  std::vector<std::vector<float>> x(4), dx0(4);
  std::vector<DeviceBuffer<float>> gx, gdx;
  for (int l = 0; l < 4; ++l) {
    const int stride = 4 << l;
    L.h[l] = H / stride;
    L.w[l] = W / stride;
    L.spatial_scale[l] = 1.0f / float(stride);
    x[size_t(l)] = random_floats(size_t(n) * L.h[l] * L.w[l] * c, 990 + uint64_t(l));
    dx0[size_t(l)] = random_floats(x[size_t(l)].size(), 995 + uint64_t(l));
    gx.emplace_back(x[size_t(l)]);
    gdx.emplace_back(dx0[size_t(l)]);
  }
  const auto u = random_floats(size_t(R) * 4, 999, 0.0f, 1.0f);
  std::vector<float> rois;
  int seen[4] = {0, 0, 0, 0};
  for (int r = 0; r < R; ++r) {
    const float side = 8.0f * std::pow(2.0f, 6.5f * u[size_t(r) * 4]);  // 8 .. 724 pixels
    const float aspect = 0.5f + u[size_t(r) * 4 + 1];
    const float x1 = 0.7f * W * u[size_t(r) * 4 + 2], y1 = 0.7f * H * u[size_t(r) * 4 + 3];
    rois.insert(rois.end(), {float(r % n), x1, y1, x1 + side * aspect, y1 + side / aspect});
    ++seen[fpn_roi_level(&rois[rois.size() - 5], L.canonical_size, L.finest, L.levels)];
  }
  for (int l = 0; l < 4; ++l) ASSERT_GT(seen[l], 0) << "no RoI pools from level " << l;
  RoiLevels cl = L, gl = L;
  std::vector<std::vector<float>> dx = dx0;
  for (int l = 0; l < 4; ++l) {
    cl.x[l] = x[size_t(l)].data();
    cl.dx[l] = dx[size_t(l)].data();
    gl.x[l] = gx[size_t(l)].get();
    gl.dx[l] = gdx[size_t(l)].get();
  }
  const size_t out = size_t(R) * pooled * pooled * c;
  std::vector<float> y(out, kJunk);
  cpu().roi_align_levels_forward(cl, n, c, rois.data(), R, pooled, 0, y.data());
  const auto dy = random_floats(out, 998);
  cpu().roi_align_levels_backward(cl, n, c, rois.data(), R, pooled, 0, dy.data());
  const DeviceBuffer<float> grois(rois), gdy(dy);
  DeviceBuffer<float> gy(std::vector<float>(out, kJunk));
  gpu().roi_align_levels_forward(gl, n, c, grois.get(), R, pooled, 0, gy.get());
  gpu().roi_align_levels_backward(gl, n, c, grois.get(), R, pooled, 0, gdy.get());
  EXPECT_TRUE(close_scaled("roi_align_levels_forward", gy.download(), y, 1e-5, 1e-6));
  for (int l = 0; l < 4; ++l)
    EXPECT_TRUE(close_scaled(cat("roi_align_levels_backward level ", l), gdx[size_t(l)].download(), dx[size_t(l)], 1e-4,
                             1e-5));
}

// ================================ Nearest 2x upsampling (FPN) ================================
struct UpsampleCase {
  int n, h, w, c;
};
void PrintTo(const UpsampleCase& c, std::ostream* os) { *os << cat("n=", c.n, " h=", c.h, " w=", c.w, " c=", c.c); }

class UpsampleGpu : public GpuTestWithParam<UpsampleCase> {};

TEST_P(UpsampleGpu, ForwardAndBackwardMatchCpuBitForBit) {
  const UpsampleCase k = GetParam();
  const auto x = random_floats(size_t(k.n) * k.h * k.w * k.c, 800);
  std::vector<float> y(x.size() * 4, kJunk);
  cpu().upsample_nearest2x_forward(x.data(), k.n, k.h, k.w, k.c, y.data());
  const auto dy = random_floats(y.size(), 801), dx0 = random_floats(x.size(), 802);
  std::vector<float> dx = dx0;
  cpu().upsample_nearest2x_backward(dy.data(), k.n, k.h, k.w, k.c, dx.data());
  const DeviceBuffer<float> gx(x), gdy(dy);
  DeviceBuffer<float> gy(std::vector<float>(y.size(), kJunk)), gdx(dx0);
  gpu().upsample_nearest2x_forward(gx.get(), k.n, k.h, k.w, k.c, gy.get());
  gpu().upsample_nearest2x_backward(gdy.get(), k.n, k.h, k.w, k.c, gdx.get());
  EXPECT_TRUE(same_bits("upsample_nearest2x_forward", gy.download(), y));
  EXPECT_TRUE(same_bits("upsample_nearest2x_backward", gdx.download(), dx));
}

INSTANTIATE_TEST_SUITE_P(Shapes, UpsampleGpu,
                         ::testing::Values(UpsampleCase{1, 1, 1, 1}, UpsampleCase{2, 3, 5, 7},
                                           UpsampleCase{2, 25, 25, 256},     // P5 -> P4 at 800x800
                                           UpsampleCase{2, 100, 100, 256}),  // P3 -> P2
                         [](const ::testing::TestParamInfo<UpsampleCase>& i) {
                           const UpsampleCase& c = i.param;
                           return cat("n", c.n, "_", c.h, "x", c.w, "x", c.c);
                         });

}  // namespace
