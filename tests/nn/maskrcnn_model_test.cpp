// The Mask R-CNN networks: whole-model finite differences of a fixed linear function of all five
// outputs (RPN objectness and deltas, box-head logits and deltas, mask logits) w.r.t. every
// parameter view, on a tiny spec (16x16 input, stride 4, one RoI of each head reaching outside the
// image) and on a tiny FPN (two stages, three RPN levels with the pooled top, RoIs of both heads on
// both pooled levels); ready() once per view in non-increasing order; the mask head's transposed
// convolution against a direct loop; the FPN's level of an RoI; output shapes of the named variants;
// under bf16, keeping the pooled RoIs and the RPN's and mask head's ReLU outputs as bf16 gives the
// bits of keeping them in fp32, in fewer bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "maskrcnn_tiny_spec.h"
#include "model_grad_check.h"
#include "core/check.h"
#include "core/rng.h"
#include "workloads/maskrcnn/maskrcnn_model.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

MaskRcnnSpec tiny_spec() { return tiny_maskrcnn_spec(false); }
MaskRcnnSpec tiny_fpn_spec() { return tiny_maskrcnn_spec(true); }

std::vector<float> uniform(size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  Rng r{7, stream};
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * r.uniform();
  return v;
}

double dot(const float* a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < b.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

struct Tiny {
  ParamStore store;
  std::unique_ptr<MaskRcnn> net;
  Arena arena;
  std::vector<float> x;
  // Box RoIs: image 0 inside, image 1 inside, image 0 reaching past the right edge of a 16x16 input.
  std::vector<float> box_rois{0, 1.5f, 2.0f, 11.0f, 9.5f, 1, 4.0f, 3.0f, 14.5f, 15.0f, 0, 9.0f, 6.0f, 19.0f, 12.0f};
  std::vector<float> mask_rois{1, 2.0f, 1.0f, 9.0f, 13.0f, 0, 5.5f, 4.5f, 15.5f, 10.0f};
  int rois = 3;
  size_t anchors = 0;
  std::vector<float> c_obj, c_del, c_cls, c_box, c_mask;
  explicit Tiny(const MaskRcnnSpec& spec = tiny_spec()) {
    x = uniform(size_t(2) * spec.in_h * spec.in_w * spec.in_c, 1);
    if (spec.fpn) {  // a fourth, small box RoI on the finer level
      box_rois.insert(box_rois.end(), {1, 20.0f, 18.0f, 25.0f, 22.0f});
      rois = 4;
    }
    net = build_maskrcnn(spec, store);
    finalize_params(store);
    init_maskrcnn(*net, store, 3);
    // Larger than the init (normal 0.01 for the RPN and predictors), so every path carries a
    // visible gradient.
    Rng r{5, 99};
    for (float& p : store.params) p += 0.3f * (2.0f * r.uniform() - 1.0f);
    arena_init_on(Device::cpu, arena, maskrcnn_arena_bytes(*net));
    anchors = maskrcnn_anchors(*net).size() / 4;
    c_obj = uniform(2 * anchors, 2);
    c_del = uniform(2 * anchors * 4, 3);
    c_cls = uniform(size_t(rois) * 3, 4);
    c_box = uniform(size_t(rois) * 12, 5);
    const int M = maskrcnn_mask_size(*net);
    c_mask = uniform(size_t(2) * M * M * 3, 6);
  }
  double loss() {
    arena_reset(arena);
    const RpnOutputs r = maskrcnn_rpn_forward(*net, store, arena, x.data(), 2, true);
    const BoxHeadOutputs b = maskrcnn_box_forward(*net, store, arena, box_rois.data(), rois);
    const float* m = maskrcnn_mask_forward(*net, store, arena, mask_rois.data(), 2);
    return dot(r.objectness, c_obj) + dot(r.deltas, c_del) + dot(b.cls_logits, c_cls) + dot(b.deltas, c_box) +
           dot(m, c_mask);
  }
  std::vector<size_t> backward() {
    std::vector<size_t> seen;
    maskrcnn_backward(*net, store, arena, {c_obj.data(), c_del.data(), c_cls.data(), c_box.data(), c_mask.data()},
                      [&seen](size_t v) { seen.push_back(v); });
    return seen;
  }
};

// Most entries carry a gradient, and six entries of every view match finite differences.
void expect_whole_model_gradient(Tiny& t) {
  std::fill(t.store.grads.begin(), t.store.grads.end(), 0.0f);
  t.loss();
  t.backward();
  int nonzero = 0;
  for (float g : t.store.grads) nonzero += g != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(t.store.param_count) * 3 / 4);
  expect_view_grads_match(t.store, [&] { return t.loss(); }, 6);
}

TEST(MaskRcnnModel, WholeModelGradientMatchesFiniteDifferences) {
  Tiny t;
  expect_whole_model_gradient(t);
}

TEST(MaskRcnnModel, ReadyOncePerViewInNonIncreasingOrder) {
  Tiny t;
  t.loss();
  expect_reverse_view_order(t.store, t.backward());
}

TEST(MaskRcnnModel, FpnWholeModelGradientMatchesFiniteDifferences) {
  Tiny t(tiny_fpn_spec());
  ASSERT_EQ(maskrcnn_rpn_levels(*t.net), 3);
  EXPECT_EQ(t.anchors, size_t(8 * 8 + 4 * 4 + 2 * 2));
  // Both heads pool from both levels.
  std::vector<int> box_levels, mask_levels;
  for (int i = 0; i < t.rois; ++i) box_levels.push_back(maskrcnn_roi_level(*t.net, &t.box_rois[size_t(i) * 5]));
  for (int i = 0; i < 2; ++i) mask_levels.push_back(maskrcnn_roi_level(*t.net, &t.mask_rois[size_t(i) * 5]));
  EXPECT_EQ(box_levels, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(mask_levels, (std::vector<int>{1, 0}));
  expect_whole_model_gradient(t);
}

TEST(MaskRcnnModel, FpnReadyOncePerViewInNonIncreasingOrder) {
  Tiny t(tiny_fpn_spec());
  t.loss();
  expect_reverse_view_order(t.store, t.backward());
}

// maskrcnn-benchmark's LevelMapper: floor(4 + log2(sqrt(area) / 224)), clamped to P2..P5.
TEST(MaskRcnnModel, FpnLevelOfAnRoiFollowsItsSize) {
  ParamStore s;
  auto net = build_maskrcnn(maskrcnn_spec("maskrcnn_r50", 64, 64, 3, 81, 1, 8, 2), s);
  auto level = [&](float side) {
    const float roi[5] = {0, 10.0f, 20.0f, 10.0f + side, 20.0f + side};
    return maskrcnn_roi_level(*net, roi) + 2;
  };
  EXPECT_EQ(level(0.0f), 2);
  EXPECT_EQ(level(10.0f), 2);
  EXPECT_EQ(level(111.0f), 2);
  EXPECT_EQ(level(112.0f), 3);
  EXPECT_EQ(level(223.0f), 3);
  EXPECT_EQ(level(224.0f), 4);
  EXPECT_EQ(level(448.0f), 5);
  EXPECT_EQ(level(5000.0f), 5);
}

// The transposed convolution, read off the mask logits of a model whose mask head is reduced to
// it: with one input RoI covering exactly one pooled cell pattern the check is indirect, so compare
// a direct loop over the deconv's definition with a model-free call of the same ops instead.
TEST(MaskRcnnModel, TransposedConvolutionIsTheDataGradientOfAStride2Conv) {
  const int n = 1, h = 2, w = 3, ci = 2, co = 3;
  const std::vector<float> x = uniform(size_t(n) * h * w * ci, 11);
  const std::vector<float> wt = uniform(size_t(4) * co * ci, 12);  // HWIO of the conv: [2, 2, co, ci]
  std::vector<float> y(size_t(n) * 2 * h * 2 * w * co, 0.0f);
  Arena a;
  const ConvDims d{n, 2 * h, 2 * w, co, ci, 2, 2, 0};
  arena_init_on(Device::cpu, a, cpu_ops().conv2d_scratch_floats(d) * sizeof(float) + 4096);
  cpu_ops().conv2d_backward_data(d, x.data(), wt.data(), y.data(), a, false);
  for (int i = 0; i < 2 * h; ++i)
    for (int j = 0; j < 2 * w; ++j)
      for (int c = 0; c < co; ++c) {
        double want = 0;
        for (int k = 0; k < ci; ++k)
          want += double(x[size_t((i / 2) * w + j / 2) * ci + k]) * wt[size_t(((i % 2) * 2 + j % 2) * co + c) * ci + k];
        EXPECT_NEAR(y[size_t(i * 2 * w + j) * co + c], want, 1e-5) << i << " " << j << " " << c;
      }
}

TEST(MaskRcnnModel, NamedVariantsBuild) {
  ParamStore s;
  auto net = build_maskrcnn(maskrcnn_spec("maskrcnn_mini", 96, 96, 1, 11, 4, 256, 64), s);
  EXPECT_EQ(maskrcnn_feature_h(*net), 12);
  EXPECT_EQ(maskrcnn_feature_w(*net), 12);
  EXPECT_EQ(maskrcnn_anchors(*net).size(), size_t(12 * 12 * 9 * 4));
  EXPECT_EQ(maskrcnn_mask_size(*net), 28);
  EXPECT_THROW(maskrcnn_spec("maskrcnn_huge", 96, 96, 1, 11, 4, 256, 64), UserError);
  // R-50-FPN at 128x128: P2..P6 at 32, 16, 8, 4, 2 cells a side, three anchors a cell.
  ParamStore s50;
  auto r50 = build_maskrcnn(maskrcnn_spec("maskrcnn_r50", 128, 128, 3, 81, 1, 8, 2), s50);
  EXPECT_EQ(maskrcnn_rpn_levels(*r50), 5);
  EXPECT_EQ(maskrcnn_feature_h(*r50), 32);
  EXPECT_EQ(maskrcnn_anchors(*r50).size(), size_t(3 * (32 * 32 + 16 * 16 + 8 * 8 + 4 * 4 + 2 * 2) * 4));
  // Sides must halve exactly down to P5.
  ParamStore bad;
  EXPECT_ANY_THROW(build_maskrcnn(maskrcnn_spec("maskrcnn_r50", 120, 120, 3, 81, 1, 8, 2), bad));
}

// Two train steps (forward, backward, an SGD update) and an eval forward: every output and gradient.
struct Bf16Run {
  std::vector<std::vector<float>> outputs;
  std::vector<float> grads, params;
  size_t activation_bytes = 0;
};

Bf16Run run_bf16(MaskRcnnSpec spec, bool storage) {
  spec.precision = Precision::bf16;
  spec.bf16_storage = storage;
  Tiny t(spec);
  Bf16Run r;
  const int M = maskrcnn_mask_size(*t.net);
  auto record = [&](const float* p, size_t count) { r.outputs.emplace_back(p, p + count); };
  for (int step = 0; step < 3; ++step) {
    const bool train = step < 2;
    arena_reset(t.arena);
    const RpnOutputs rpn = maskrcnn_rpn_forward(*t.net, t.store, t.arena, t.x.data(), 2, train);
    const BoxHeadOutputs box = maskrcnn_box_forward(*t.net, t.store, t.arena, t.box_rois.data(), t.rois);
    const float* mask = maskrcnn_mask_forward(*t.net, t.store, t.arena, t.mask_rois.data(), 2);
    record(rpn.objectness, t.anchors * 2);
    record(rpn.deltas, t.anchors * 2 * 4);
    record(box.cls_logits, size_t(t.rois) * 3);
    record(box.deltas, size_t(t.rois) * 12);
    record(mask, size_t(2) * M * M * 3);
    if (!train) break;
    std::fill(t.store.grads.begin(), t.store.grads.end(), 0.0f);
    t.backward();
    r.grads.insert(r.grads.end(), t.store.grads.begin(), t.store.grads.end());
    for (size_t i = 0; i < t.store.params.size(); ++i) t.store.params[i] -= 0.05f * t.store.grads[i];
  }
  r.params = t.store.params;
  r.activation_bytes = maskrcnn_activation_bytes(*t.net);
  return r;
}

void expect_bf16_storage_lossless(const MaskRcnnSpec& spec) {
  const Bf16Run kept = run_bf16(spec, true), wide = run_bf16(spec, false);
  ASSERT_EQ(kept.outputs.size(), wide.outputs.size());
  for (size_t i = 0; i < kept.outputs.size(); ++i) EXPECT_EQ(kept.outputs[i], wide.outputs[i]) << "output " << i;
  EXPECT_EQ(kept.grads, wide.grads);
  EXPECT_EQ(kept.params, wide.params);
  // The pooled RoIs of both heads, the RPN's hidden layer on every level, the mask convs' and the
  // deconv's outputs: two bytes a value instead of four.
  const MaskRcnnSpec& s = spec;
  ParamStore store;
  auto net = build_maskrcnn(s, store);
  const int M = maskrcnn_mask_size(*net), mp = s.mask_pool;
  const size_t fc = s.fpn ? size_t(s.fpn_channels) : size_t(s.stages.back().channels);
  const size_t anchors_per_cell = (s.fpn ? 1 : s.anchors.sizes.size()) * s.anchors.ratios.size();
  const size_t rpn_cells = maskrcnn_anchors(*net).size() / 4 / anchors_per_cell;  // all levels'
  const size_t halved = size_t(s.max_rois) * s.box_pool * s.box_pool * fc + size_t(s.max_masks) * mp * mp * fc +
                        size_t(s.max_batch) * rpn_cells * fc +
                        size_t(s.max_masks) * mp * mp * s.mask_channels * s.mask_convs +
                        size_t(s.max_masks) * M * M * s.mask_channels;
  EXPECT_EQ(wide.activation_bytes - kept.activation_bytes, 2 * halved);
  // (The arena that maskrcnn_arena_bytes sized held the fp32 copies: arena_floats throws when full.)
}

// Two mask convolutions here, one in the FPN's: the mask head's gradients end in either Arena turn.
TEST(MaskRcnnBf16Storage, GivesTheBitsOfFp32StorageInHalfTheBytes) {
  MaskRcnnSpec spec = tiny_spec();
  spec.mask_convs = 2;
  expect_bf16_storage_lossless(spec);
}

TEST(MaskRcnnBf16Storage, FpnGivesTheBitsOfFp32StorageInHalfTheBytes) {
  expect_bf16_storage_lossless(tiny_fpn_spec());
}

// In fp32 the switch changes nothing.
TEST(MaskRcnnBf16Storage, OnlyABf16RunKeepsBf16) {
  MaskRcnnSpec on = tiny_spec(), off = tiny_spec();
  off.bf16_storage = false;
  ParamStore s1, s2;
  EXPECT_EQ(maskrcnn_activation_bytes(*build_maskrcnn(on, s1)), maskrcnn_activation_bytes(*build_maskrcnn(off, s2)));
}

}  // namespace
