// The Mask R-CNN networks on the GPU against the CPU, at the model's interface: the same tiny
// model (with and without an FPN), the same input and the same RoIs (the host's box logic is left
// out, so no decision can differ), then every output and every parameter's gradient of a fixed
// linear function of the outputs. fp32 and bf16 (bf16 storage of the pooled RoIs and the heads'
// ReLU outputs on both devices). Tolerances as the workload step test's: each view's gradients
// within 2e-3 (bf16 2e-2) of its largest.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../nn/maskrcnn_tiny_spec.h"
#include "gpu_test_util.h"
#include "maskrcnn_gpu_util.h"
#include "workloads/maskrcnn/maskrcnn_model.h"

namespace mlpd {
namespace {

using gpu_test::random_floats;

struct Result {
  std::vector<std::vector<float>> outputs;
  std::vector<float> grads;
  std::vector<ParamView> views;
};

// rois_on_device: the heads' RoIs handed over in device memory (as the training step's sampler
// leaves them), not host memory.
Result run_on(Device device, Precision precision, bool fpn, bool rois_on_device = false) {
  MaskRcnnSpec spec = test::tiny_maskrcnn_spec(fpn);
  spec.mask_convs = 2;  // the mask head's gradients through both of their Arena turns
  spec.max_rois = 4;
  spec.device = device;
  spec.precision = precision;
  const std::unique_ptr<gpu_test::PlacedMaskRcnn> m = gpu_test::placed_maskrcnn(spec);
  ParamStore& store = m->store;
  MaskRcnn* net = m->net.get();
  Arena& arena = m->arena;

  const std::vector<float> x = random_floats(size_t(2) * spec.in_h * spec.in_w, 1);
  const std::vector<float> box_rois{0, 1.5f, 2.0f, 11.0f, 9.5f, 1, 4.0f,  3.0f,  14.5f, 15.0f,
                                    0, 9.0f, 6.0f, 19.0f, 12.0f, 1, 20.0f, 18.0f, 25.0f, 22.0f};
  const std::vector<float> mask_rois{1, 2.0f, 1.0f, 9.0f, 13.0f, 0, 5.5f, 4.5f, 15.5f, 10.0f};
  const int rois = fpn ? 4 : 3, masks = 2, M = maskrcnn_mask_size(*net);  // the 4th box RoI: FPN only
  const size_t anchors = maskrcnn_anchors(*net).size() / 4;
  const RpnOutputs rpn = maskrcnn_rpn_forward(*net, store, arena, x.data(), 2, true);
  DeviceBytes box_rois_dev = alloc_on(device, box_rois.size() * sizeof(float));
  DeviceBytes mask_rois_dev = alloc_on(device, mask_rois.size() * sizeof(float));
  copy_to_device(device, as<float>(box_rois_dev), box_rois.data(), box_rois.size() * sizeof(float));
  copy_to_device(device, as<float>(mask_rois_dev), mask_rois.data(), mask_rois.size() * sizeof(float));
  const BoxHeadOutputs box =
      rois_on_device ? maskrcnn_box_forward(*net, store, arena, as<float>(box_rois_dev), rois, true)
                     : maskrcnn_box_forward(*net, store, arena, box_rois.data(), rois);
  const float* mask = rois_on_device ? maskrcnn_mask_forward(*net, store, arena, as<float>(mask_rois_dev), masks, true)
                                     : maskrcnn_mask_forward(*net, store, arena, mask_rois.data(), masks);

  Result res;
  const std::vector<size_t> sizes{2 * anchors, 2 * anchors * 4, size_t(rois) * 3, size_t(rois) * 12,
                                  size_t(masks) * M * M * 3};
  const float* outs[] = {rpn.objectness, rpn.deltas, box.cls_logits, box.deltas, mask};
  std::vector<std::vector<float>> grads_in;
  std::vector<DeviceBytes> device_grads;
  std::vector<const float*> g;
  for (size_t i = 0; i < sizes.size(); ++i) {
    res.outputs.emplace_back(sizes[i]);
    copy_to_host(device, res.outputs.back().data(), outs[i], sizes[i] * sizeof(float));
    grads_in.push_back(random_floats(sizes[i], 10 + i));
    if (device == Device::cpu) {
      g.push_back(grads_in.back().data());
    } else {
      device_grads.push_back(alloc_on(device, sizes[i] * sizeof(float)));
      copy_to_device(device, as<float>(device_grads.back()), grads_in.back().data(), sizes[i] * sizeof(float));
      g.push_back(as<float>(device_grads.back()));
    }
  }
  maskrcnn_backward(*net, store, arena, {g[0], g[1], g[2], g[3], g[4]}, [](size_t) {});
  res.grads = gpu_test::host_grads(store);
  res.views = store.views;
  return res;
}

void expect_gpu_matches_cpu(Precision precision, bool fpn, bool rois_on_device = false) {
  const bool bf16 = precision == Precision::bf16;
  const double rel = bf16 ? 2e-2 : 2e-3;
  const Result cpu = run_on(Device::cpu, precision, fpn);
  const Result gpu = run_on(Device::cuda, precision, fpn, rois_on_device);
  ASSERT_EQ(cpu.outputs.size(), gpu.outputs.size());
  for (size_t i = 0; i < cpu.outputs.size(); ++i) {
    float largest = 0.0f;
    for (float v : cpu.outputs[i]) largest = std::max(largest, std::fabs(v));
    EXPECT_TRUE(gpu_test::all_close(gpu_test::cat("output ", i), gpu.outputs[i], cpu.outputs[i], 0.0,
                                    rel * largest + 1e-6));
  }
  gpu_test::expect_views_close(cpu.views, gpu.grads, cpu.grads, rel);
}

using GpuMaskRcnnModel = gpu_test::GpuTest;

TEST_F(GpuMaskRcnnModel, OutputsAndGradientsMatchTheCpu) { expect_gpu_matches_cpu(Precision::fp32, false); }
TEST_F(GpuMaskRcnnModel, FpnOutputsAndGradientsMatchTheCpu) { expect_gpu_matches_cpu(Precision::fp32, true); }
TEST_F(GpuMaskRcnnModel, RoisInDeviceMemoryMatchTheCpu) { expect_gpu_matches_cpu(Precision::fp32, false, true); }
TEST_F(GpuMaskRcnnModel, FpnRoisInDeviceMemoryMatchTheCpu) { expect_gpu_matches_cpu(Precision::fp32, true, true); }
TEST_F(GpuMaskRcnnModel, Bf16OutputsAndGradientsMatchTheCpuBf16) { expect_gpu_matches_cpu(Precision::bf16, false); }
TEST_F(GpuMaskRcnnModel, FpnBf16OutputsAndGradientsMatchTheCpuBf16) { expect_gpu_matches_cpu(Precision::bf16, true); }

}  // namespace
}  // namespace mlpd
