// Mask R-CNN's whole training step (maskrcnn_train_batch) on the GPU against the CPU, with the tiny
// FPN model: on the GPU the heads' RoIs are sampled and the mask targets made by device ops, each
// RoI's level chosen inside RoIAlign, and the heads run on the sample's capacity (rows past the
// sample zero, with zero gradients), where the CPU reads the counts and runs the sample alone. The
// proposals are few, so an image samples fewer RoIs than its share and the GPU's heads do run on
// padding. The five losses and every parameter's gradient must agree (fp32 tolerances).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../nn/maskrcnn_tiny_spec.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "gpu_test_util.h"
#include "kernels/device.h"
#include "maskrcnn_gpu_util.h"
#include "workloads/maskrcnn/maskrcnn_step.h"

using namespace mlpd;

namespace {

constexpr int kImages = 2, kSide = 32;

// Two 32x32 images on noise, with one and two filled rectangles (instances, class 1 or 2).
struct Scene {
  std::vector<float> x;
  std::vector<std::vector<uint8_t>> masks;
  std::vector<ImageTargets> targets;
};
Scene scene() {
  Scene s;
  Rng r{17, 3};
  s.x.resize(size_t(kImages) * kSide * kSide);
  for (float& v : s.x) v = 0.2f * (r.uniform() - 0.5f);
  s.targets.resize(kImages);
  const int boxes[3][5] = {{3, 4, 17, 12, 1}, {2, 18, 9, 30, 2}, {15, 6, 29, 14, 1}};  // x1 y1 x2 y2 class
  for (int b = 0; b < 3; ++b) {
    const int img = b == 0 ? 0 : 1;
    std::vector<uint8_t> m(size_t(kSide) * kSide, 0);
    for (int y = boxes[b][1]; y < boxes[b][3]; ++y)
      for (int x = boxes[b][0]; x < boxes[b][2]; ++x) {
        m[size_t(y) * kSide + x] = 1;
        s.x[(size_t(img) * kSide + y) * kSide + x] = 1.0f;
      }
    s.masks.push_back(std::move(m));
    ImageTargets& t = s.targets[size_t(img)];
    t.boxes.insert(t.boxes.end(), {float(boxes[b][0]), float(boxes[b][1]), float(boxes[b][2]), float(boxes[b][3])});
    t.labels.push_back(boxes[b][4]);
  }
  size_t k = 0;
  for (ImageTargets& t : s.targets)
    for (int o = 0; o < t.count(); ++o) t.masks.push_back(s.masks[k++].data());
  return s;
}

struct StepResult {
  double terms[kMaskRcnnLossTerms] = {};
  MaskRcnnRows rows;
  std::vector<float> grads;
  std::vector<ParamView> views;
};

StepResult step_on(Device device, const Scene& s) {
  MaskRcnnSpec spec = test::tiny_maskrcnn_spec(true);
  spec.max_rois = kImages * 16;
  spec.max_masks = kImages * 4;
  spec.device = device;
  MaskRcnnTrainSpec train;
  train.rpn.batch = 32;
  train.proposals.pre_nms_topk = 40;
  train.proposals.post_nms_topk = 6;  // with the ground truth, fewer candidates than the 16 RoIs
  train.rois.batch = 16;
  train.seed = 5;
  const std::unique_ptr<gpu_test::PlacedMaskRcnn> m = gpu_test::placed_maskrcnn(spec);
  MaskRcnnStepBuffers buffers = make_step_buffers(*m->net, train.rpn, {train.proposals});
  DeviceBytes terms = alloc_on(device, sizeof(double) * kMaskRcnnLossTerms);
  StepResult res;
  res.rows = maskrcnn_train_batch(*m->net, m->store, m->arena, buffers, train, s.x.data(), kImages, s.targets, 11,
                                  1.0f / kImages, as<double>(terms), [](size_t) {});
  copy_to_host(device, res.terms, as<double>(terms), sizeof(res.terms));
  res.grads = gpu_test::host_grads(m->store);
  res.views = m->store.views;
  return res;
}

using GpuMaskRcnnStep = gpu_test::GpuTest;

TEST_F(GpuMaskRcnnStep, FpnStepWithDeviceSamplingMatchesTheCpu) {
  const Scene s = scene();
  const StepResult cpu = step_on(Device::cpu, s);
  const StepResult gpu = step_on(Device::cuda, s);
  EXPECT_GT(cpu.rows.rois, 0);
  EXPECT_GT(cpu.rows.masks, 0);
  EXPECT_LT(cpu.rows.rois, gpu.rows.rois) << "the GPU's box head runs on padding rows too";
  const char* names[kMaskRcnnLossTerms] = {"rpn objectness", "rpn box", "classifier", "box", "mask"};
  for (int i = 0; i < kMaskRcnnLossTerms; ++i) {
    EXPECT_GT(cpu.terms[i], 0.0) << names[i];
    EXPECT_NEAR(gpu.terms[i], cpu.terms[i], 1e-4 * std::fabs(cpu.terms[i]) + 1e-7) << names[i];
  }
  gpu_test::expect_views_close(cpu.views, gpu.grads, cpu.grads, 2e-3);
}

}  // namespace
