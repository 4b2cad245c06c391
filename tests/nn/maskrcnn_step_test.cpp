// Mask R-CNN's training step end to end on a toy problem: 32x32 images holding one or two filled
// rectangles (class 1 wide, class 2 tall) on noise; plain SGD on the step's gradients must bring
// every loss term down (the RPN learns the objects, the heads their classes, boxes and masks), and
// the step is reproducible from its key. The reference-scale model (R-50-FPN) runs a step on a
// batch of two at a reduced image size.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <vector>

#include "core/param_store.h"
#include "core/rng.h"
#include "detection/rle.h"
#include "workloads/maskrcnn/maskrcnn_infer.h"
#include "workloads/maskrcnn/maskrcnn_step.h"

using namespace mlpd;

namespace {

constexpr int kSize = 32;

MaskRcnnSpec toy_spec() {
  MaskRcnnSpec s;
  s.variant = "toy";
  s.in_h = s.in_w = kSize;
  s.in_c = 1;
  s.classes = 3;
  s.stem_channels = 8;
  s.stages = {{16, 1, 2}};
  s.anchors.stride = 4;
  s.anchors.sizes = {8, 16};
  s.anchors.ratios = {0.5f, 1.0f, 2.0f};
  s.box_pool = 5;
  s.box_fc = 64;
  s.mask_pool = 7;
  s.mask_channels = 16;
  s.mask_convs = 1;
  s.max_batch = 4;
  s.max_rois = 4 * 32;
  s.max_masks = 4 * 8;
  return s;
}

struct Scene {
  std::vector<float> x;                   // [n, 32, 32, 1]
  std::vector<std::vector<uint8_t>> masks;  // per object
  std::vector<ImageTargets> targets;
};

Scene toy_scenes(int n, uint64_t seed) {
  Scene s;
  s.x.assign(size_t(n) * kSize * kSize, 0.0f);
  Rng r{seed, 1};
  for (float& v : s.x) v = 0.2f * (r.uniform() - 0.5f);
  s.targets.resize(size_t(n));
  s.masks.reserve(size_t(n) * 2);
  for (int i = 0; i < n; ++i) {
    const int objects = 1 + i % 2;
    for (int o = 0; o < objects; ++o) {
      const int cls = 1 + (i + o) % 2;
      const int w = cls == 1 ? 14 : 7, h = cls == 1 ? 7 : 14;
      const int x0 = o == 0 ? 2 + int(r.uniform() * 4) : 18 + int(r.uniform() * 4);
      const int y0 = 2 + int(r.uniform() * 12);
      std::vector<uint8_t> m(size_t(kSize) * kSize, 0);
      for (int y = y0; y < y0 + h; ++y)
        for (int x = x0; x < x0 + w && x < kSize; ++x) {
          m[size_t(y) * kSize + x] = 1;
          s.x[(size_t(i) * kSize + y) * kSize + x] = 1.0f;
        }
      s.masks.push_back(std::move(m));
      ImageTargets& t = s.targets[size_t(i)];
      t.boxes.insert(t.boxes.end(), {float(x0), float(y0), float(std::min(x0 + w, kSize)), float(y0 + h)});
      t.labels.push_back(cls);
    }
  }
  size_t k = 0;
  for (ImageTargets& t : s.targets)
    for (int o = 0; o < t.count(); ++o) t.masks.push_back(s.masks[k++].data());
  return s;
}

struct Toy {
  ParamStore store;
  std::unique_ptr<MaskRcnn> net;
  Arena arena;
  MaskRcnnStepBuffers buffers;
  MaskRcnnTrainSpec spec;
  Toy() {
    openblas_set_num_threads(1);
    net = build_maskrcnn(toy_spec(), store);
    finalize_params(store);
    init_maskrcnn(*net, store, 4);
    arena_init_on(Device::cpu, arena, maskrcnn_arena_bytes(*net));
    spec.rpn.batch = 64;
    spec.proposals.pre_nms_topk = 200;
    spec.proposals.post_nms_topk = 40;
    spec.rois.batch = 32;
    buffers = make_step_buffers(*net, spec.rpn, {spec.proposals, infer_proposals()});
  }
  static ProposalSpec infer_proposals() {
    ProposalSpec p;
    p.pre_nms_topk = 200;
    p.post_nms_topk = 20;
    return p;
  }
  MaskRcnnLosses step(const Scene& s, uint64_t key, float lr) {
    std::fill(store.grads.begin(), store.grads.end(), 0.0f);
    const int n = static_cast<int>(s.targets.size());
    double terms[kMaskRcnnLossTerms] = {};
    const MaskRcnnLosses l = maskrcnn_losses(
        terms, maskrcnn_train_batch(*net, store, arena, buffers, spec, s.x.data(), n, s.targets, key, 1.0f / n, terms,
                                    [](size_t) {}));
    for (size_t i = 0; i < store.params.size(); ++i) store.params[i] -= lr * store.grads[i];
    return l;
  }
};

TEST(MaskRcnnStep, SgdBringsEveryLossDown) {
  Toy t;
  const Scene s = toy_scenes(4, 9);
  MaskRcnnLosses first, last;
  for (int it = 0; it < 150; ++it) {
    const MaskRcnnLosses l = t.step(s, uint64_t(it) * 4, 0.05f);
    ASSERT_TRUE(std::isfinite(l.total()));
    if (it == 0) first = l;
    last = l;
  }
  EXPECT_GT(first.rois, 0);
  EXPECT_GT(first.masks, 0);
  std::printf("losses first / last: rpn cls %.3f %.3f, rpn box %.3f %.3f, cls %.3f %.3f, box %.3f %.3f, mask %.3f %.3f\n",
              first.rpn_objectness, last.rpn_objectness, first.rpn_box, last.rpn_box, first.classifier,
              last.classifier, first.box, last.box, first.mask, last.mask);
  EXPECT_LT(last.rpn_objectness, 0.5 * first.rpn_objectness);
  EXPECT_LT(last.classifier, 0.5 * first.classifier);
  EXPECT_LT(last.mask, 0.6 * first.mask);
  EXPECT_LT(last.total(), 0.5 * first.total());
}

TEST(MaskRcnnStep, SameKeySameGradients) {
  Toy a, b;
  const Scene s = toy_scenes(4, 9);
  std::fill(a.store.grads.begin(), a.store.grads.end(), 0.0f);
  std::fill(b.store.grads.begin(), b.store.grads.end(), 0.0f);
  double ta[kMaskRcnnLossTerms] = {}, tb[kMaskRcnnLossTerms] = {};
  const MaskRcnnLosses la = maskrcnn_losses(ta, maskrcnn_train_batch(*a.net, a.store, a.arena, a.buffers, a.spec,
                                                                     s.x.data(), 4, s.targets, 12, 0.25f, ta,
                                                                     [](size_t) {}));
  const MaskRcnnLosses lb = maskrcnn_losses(tb, maskrcnn_train_batch(*b.net, b.store, b.arena, b.buffers, b.spec,
                                                                     s.x.data(), 4, s.targets, 12, 0.25f, tb,
                                                                     [](size_t) {}));
  EXPECT_EQ(la.total(), lb.total());
  EXPECT_EQ(a.store.grads, b.store.grads);
}

}  // namespace

// After the toy training, inference finds each object: a detection of the right class with box IoU
// >= 0.5 and mask IoU >= 0.5 against the ground truth.
TEST(MaskRcnnStep, InferenceAfterTrainingFindsTheObjects) {
  Toy t;
  const Scene s = toy_scenes(4, 9);
  for (int it = 0; it < 150; ++it) t.step(s, uint64_t(it) * 4, 0.05f);
  MaskRcnnInferSpec spec;
  spec.proposals = Toy::infer_proposals();
  const std::vector<ImageDetections> d =
      maskrcnn_infer_batch(*t.net, t.store, t.arena, t.buffers, spec, s.x.data(), 4);
  ASSERT_EQ(d.size(), 4u);
  size_t k = 0;
  for (int i = 0; i < 4; ++i) {
    const ImageTargets& gt = s.targets[size_t(i)];
    ASSERT_EQ(d[size_t(i)].masks.size(), size_t(d[size_t(i)].boxes.count()));
    for (int o = 0; o < gt.count(); ++o, ++k) {
      const Rle gm = rle_encode(s.masks[k].data(), kSize, kSize);
      double best_box = 0, best_mask = 0;
      for (int j = 0; j < d[size_t(i)].boxes.count(); ++j) {
        if (d[size_t(i)].boxes.labels[size_t(j)] != gt.labels[size_t(o)]) continue;
        best_box = std::max<double>(best_box, box_iou(d[size_t(i)].boxes.boxes.data() + j * 4, gt.boxes.data() + o * 4));
        best_mask = std::max(best_mask, rle_iou(d[size_t(i)].masks[size_t(j)], gm, false));
      }
      EXPECT_GE(best_box, 0.5) << "image " << i << " object " << o;
      EXPECT_GE(best_mask, 0.5) << "image " << i << " object " << o;
    }
  }
}

// MLPerf's model (maskrcnn_r50: ResNet-50, FPN P2..P6, 81 classes, box head fc 1024, mask head
// 4 x 256) at 64x64 (800x800 in the reference), a batch of two RGB images with two objects each:
// every loss term finite and positive, every parameter view gets a finite, non-zero gradient. At
// this size the anchors of P4..P6 (128 to 512 pixels) all cross the border, so none is left out
// (the reference's straddle threshold 0 would leave those levels without an RPN gradient).
TEST(MaskRcnnStep, ReferenceModelRunsAStepOnABatchOfTwo) {
  constexpr int side = 64, n = 2;
  openblas_set_num_threads(1);  // as train runs; OpenBLAS's threads thrash beside other tests
  ParamStore store;
  auto net = build_maskrcnn(maskrcnn_spec("maskrcnn_r50", side, side, 3, 81, n, n * 64, n * 8), store);
  finalize_params(store);
  init_maskrcnn(*net, store, 1);
  Arena arena;
  arena_init_on(Device::cpu, arena, maskrcnn_arena_bytes(*net));
  MaskRcnnTrainSpec spec;  // the reference's RPN (256 anchors, 1:1) and RoI (1:3) sampling
  spec.proposals.pre_nms_topk = 2000;
  spec.proposals.post_nms_topk = 1000;
  spec.rpn.straddle = -1.0f;
  spec.rois.batch = 64;
  MaskRcnnStepBuffers buffers = make_step_buffers(*net, spec.rpn, {spec.proposals});
  // Image i: a 20x30 box of class 3 + i and an 8x8 one of class 17, on noise.
  std::vector<float> x(size_t(n) * side * side * 3);
  Rng r{3, 1};
  for (float& v : x) v = r.uniform() - 0.5f;
  std::vector<std::vector<uint8_t>> masks;
  std::vector<ImageTargets> targets(n);
  for (int i = 0; i < n; ++i) {
    const int boxes[2][4] = {{5 + 10 * i, 10, 25 + 10 * i, 40}, {45, 50 - 15 * i, 53, 58 - 15 * i}};
    for (int o = 0; o < 2; ++o) {
      const int* b = boxes[o];
      std::vector<uint8_t> m(size_t(side) * side, 0);
      for (int yy = b[1]; yy < b[3]; ++yy)
        for (int xx = b[0]; xx < b[2]; ++xx) {
          m[size_t(yy) * side + xx] = 1;
          for (int c = 0; c < 3; ++c) x[((size_t(i) * side + yy) * side + xx) * 3 + c] = 1.0f + 0.5f * c;
        }
      masks.push_back(std::move(m));
      ImageTargets& t = targets[size_t(i)];
      t.boxes.insert(t.boxes.end(), {float(b[0]), float(b[1]), float(b[2]), float(b[3])});
      t.labels.push_back(o == 0 ? 3 + i : 17);
    }
  }
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < 2; ++o) targets[size_t(i)].masks.push_back(masks[size_t(i * 2 + o)].data());
  std::fill(store.grads.begin(), store.grads.end(), 0.0f);
  size_t ready_calls = 0;
  double terms[kMaskRcnnLossTerms] = {};
  const MaskRcnnLosses l = maskrcnn_losses(terms, maskrcnn_train_batch(*net, store, arena, buffers, spec, x.data(), n,
                                                                       targets, 1, 1.0f / n, terms,
                                                                       [&](size_t) { ++ready_calls; }));
  std::printf("R-50-FPN step at %dx%d, batch %d: rpn cls %.3f, rpn box %.3f, cls %.3f, box %.3f, mask %.3f, "
              "%d RoIs, %d masks\n",
              side, side, n, l.rpn_objectness, l.rpn_box, l.classifier, l.box, l.mask, l.rois, l.masks);
  for (double v : {l.rpn_objectness, l.rpn_box, l.classifier, l.box, l.mask}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0.0);
  }
  EXPECT_EQ(l.rois, n * 64);
  EXPECT_GT(l.masks, 0);
  EXPECT_EQ(ready_calls, store.views.size());
  for (const ParamView& v : store.views) {
    double sum = 0;
    bool finite = true;
    for (size_t i = v.offset; i < v.offset + v.count; ++i) {
      finite = finite && std::isfinite(store.grads[i]);
      sum += std::fabs(store.grads[i]);
    }
    EXPECT_TRUE(finite) << v.name;
    EXPECT_GT(sum, 0.0) << v.name;
  }
}
