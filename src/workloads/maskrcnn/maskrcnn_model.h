// Mask R-CNN's networks (the box logic between them is rcnn_boxes.h, on the host): a ResNet
// backbone giving one feature map or, with an FPN, one per stage, the RPN head on every level, and
// on RoIs pooled by RoIAlign the box head and the mask head. NHWC throughout.
//   backbone   ResNet stem + stages (batch norm); without FPN the last stage's output is the one
//              feature map [n, fh, fw, C] at anchors.stride
//   fpn        (spec.fpn) per stage output C_l a lateral 1x1 conv + bias to fpn_channels, summed
//              with the nearest-2x upsampled sum of the level above (top-down), then a 3x3 conv +
//              bias: P_l at the stage's stride; P6 = P5 subsampled by 2 (a 1x1/2 max pool) for the
//              RPN only. maskrcnn-benchmark's FPN, no activations.
//   rpn        3x3 conv C->C + bias + ReLU, then per cell a linear C->A (objectness logits) and
//              C->4A (box deltas), the same weights on every level: outputs [n, anchors] and
//              [n, anchors, 4] in the anchors' order (level by level, then cell, then anchor).
//              With an FPN, level l's anchors have the one size anchors.sizes[l] (and every ratio).
//   levels     with an FPN each RoI is pooled from P_k, k = floor(4 + log2(sqrt(area) /
//              fpn_canonical_size)) clamped to the pooled levels (P2..P5 for ResNet-50), as
//              maskrcnn-benchmark's LevelMapper (area from x2 - x1, our box convention)
//   box head   RoIAlign box_pool x box_pool -> fc6 (ReLU) -> fc7 (ReLU) -> class logits [R, classes]
//              and class-specific deltas [R, classes*4]
//   mask head  RoIAlign mask_pool x mask_pool -> mask_convs x (3x3 conv + bias + ReLU) -> 2x2/2
//              transposed conv + bias + ReLU -> per-pixel linear to `classes` logits: [R, M, M,
//              classes], M = 2 * mask_pool; the loss reads the RoI's own class channel
// RoIAlign: sampling ratio `sampling_ratio`, aligned false (MLPerf v0.7's maskrcnn-benchmark).
// Biases of convolutions are added as a rank-1 GEMM with a vector of ones (and reduced back the
// same way), so that the heads use only the ops both devices have.
// Where it differs from MLPerf's reference R-50-FPN: the reference's frozen first stage and frozen
// batch norm are trained here; the mini model has one feature level and no FPN.
#pragma once
#include "core/precision.h"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "kernels/device.h"
#include "workloads/maskrcnn/rcnn_boxes.h"

namespace mlpd {

struct MaskRcnnStage {
  int channels = 0, blocks = 1, stride = 1;  // the first block carries the stride
};

struct MaskRcnnSpec {
  std::string variant = "maskrcnn_mini";
  int in_h = 96, in_w = 96, in_c = 1;
  int classes = 11;  // background included (index 0)
  int stem_channels = 16, stem_kernel = 3, stem_stride = 2;
  bool stem_maxpool = false;
  bool bottleneck = false;  // bottleneck blocks (ResNet-50) instead of basic ones
  std::vector<MaskRcnnStage> stages;
  AnchorSpec anchors;       // without FPN anchors.stride == the backbone's stride; with one, the
                            // sizes are one per RPN level and the strides come from the levels
  bool fpn = false;
  int fpn_channels = 256;
  bool fpn_top_pool = true;           // P6 for the RPN
  float fpn_canonical_size = 224.0f;  // RoIs of this size go to P4
  int box_pool = 7, box_fc = 256;
  int mask_pool = 14, mask_channels = 32, mask_convs = 2;
  int sampling_ratio = 2;
  int max_batch = 8;        // images per forward
  int max_rois = 512;       // box-head rows per forward
  int max_masks = 128;      // mask-head rows per forward
  float bn_momentum = 0.9f, bn_eps = 1e-5f;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
  // Under bf16, keep as bf16 the activations that lose no bit by it (nn/bf16_storage.h): the RoIs'
  // pooled features, the RPN's and the mask head's ReLU outputs. Off only to test that it is lossless.
  bool bf16_storage = true;
};

// "maskrcnn_mini" (96x96 scenes: stride 8, 12x12x64) and "maskrcnn_r50" (ResNet-50 with the FPN,
// P2..P6, the reference's R-50-FPN: input sides a multiple of 32); UserError for an unknown name.
MaskRcnnSpec maskrcnn_spec(const std::string& variant, int in_h, int in_w, int in_c, int classes, int max_batch,
                           int max_rois, int max_masks);

struct MaskRcnn;  // opaque

std::unique_ptr<MaskRcnn> build_maskrcnn(const MaskRcnnSpec& spec, ParamStore& store);
void init_maskrcnn(MaskRcnn& net, ParamStore& store, uint64_t seed);
size_t maskrcnn_arena_bytes(const MaskRcnn& net);
const MaskRcnnSpec& maskrcnn_spec_of(const MaskRcnn& net);
// The finest feature level's size (the only level without FPN), and the RPN's level count.
int maskrcnn_feature_h(const MaskRcnn& net);
int maskrcnn_feature_w(const MaskRcnn& net);
int maskrcnn_rpn_levels(const MaskRcnn& net);
// Where each RPN level's anchors start in an image's list, and the total: [levels + 1].
std::vector<int> maskrcnn_level_first_anchor(const MaskRcnn& net);
// The pooled level (0 the finest) an RoI [5] (batch index, x1, y1, x2, y2) is pooled from.
int maskrcnn_roi_level(const MaskRcnn& net, const float* roi);
// One image's anchors, host [fh*fw*A, 4] pixels.
const std::vector<float>& maskrcnn_anchors(const MaskRcnn& net);
int maskrcnn_mask_size(const MaskRcnn& net);  // M

// x: [n, in_h, in_w, in_c] in HOST memory. Outputs on the device, valid until the next forward.
struct RpnOutputs {
  const float* objectness = nullptr;  // [n, fh*fw*A]
  const float* deltas = nullptr;      // [n, fh*fw*A, 4]
};
RpnOutputs maskrcnn_rpn_forward(MaskRcnn& net, ParamStore& store, Arena& arena, const float* x, int n, bool train);
// rois: [R, 5] (image index in the batch, x1, y1, x2, y2 in input pixels) in HOST memory, or with
// rois_on_device in the model's device memory (as the step's sampler leaves them; nothing waits
// for the device then, an FPN's level per RoI chosen by the op). Outputs on the device:
struct BoxHeadOutputs {
  const float* cls_logits = nullptr;  // [R, classes]
  const float* deltas = nullptr;      // [R, classes * 4]
};
BoxHeadOutputs maskrcnn_box_forward(MaskRcnn& net, ParamStore& store, Arena& arena, const float* rois, int num_rois,
                                    bool rois_on_device = false);
// Mask logits of every class, on the device [R, M, M, classes].
const float* maskrcnn_mask_forward(MaskRcnn& net, ParamStore& store, Arena& arena, const float* rois, int num_rois,
                                   bool rois_on_device = false);

// Gradients (device) of the last train-mode forwards: RPN outputs of the same n, box-head outputs
// of its last call, mask logits of its last call (num_masks 0: no mask head this step). ADDS the
// parameter gradients; ready(view) once per view in reverse registration order.
struct MaskRcnnGrads {
  const float* objectness = nullptr;
  const float* rpn_deltas = nullptr;
  const float* cls_logits = nullptr;
  const float* box_deltas = nullptr;
  const float* mask_logits = nullptr;
};
void maskrcnn_backward(MaskRcnn& net, ParamStore& store, Arena& arena, const MaskRcnnGrads& g,
                       const std::function<void(size_t)>& ready);

std::string maskrcnn_summary(const MaskRcnn& net);
// Bytes of the model's activation and gradient buffers on its device (DeviceBuffers).
size_t maskrcnn_activation_bytes(const MaskRcnn& net);
// Forward FLOPs (2 * multiply-adds) of one image through backbone and RPN, and per RoI of each head.
double maskrcnn_backbone_flops(const MaskRcnn& net);
double maskrcnn_box_flops_per_roi(const MaskRcnn& net);
double maskrcnn_mask_flops_per_roi(const MaskRcnn& net);

}  // namespace mlpd

template <>
struct std::default_delete<mlpd::MaskRcnn> {
  void operator()(mlpd::MaskRcnn* p) const;
};
