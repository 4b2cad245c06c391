// The tiny Mask R-CNN the model tests build (tests/nn/maskrcnn_model_test.cpp, and on the GPU
// tests/gpu/gpu_maskrcnn_model_test.cpp): a 16x16 input at stride 4 with two anchor sizes, or with
// an FPN a 32x32 input (stem to 16x16, stages at 8x8 and 4x4, P6 2x2) where RoIs of side below 8
// pixels pool from the finer level and the others from the coarser.
#pragma once
#include "workloads/maskrcnn/maskrcnn_model.h"

namespace mlpd::test {

inline MaskRcnnSpec tiny_maskrcnn_spec(bool fpn) {
  MaskRcnnSpec s;
  s.variant = fpn ? "tiny_fpn" : "tiny";
  s.in_h = s.in_w = 16;
  s.in_c = 1;
  s.classes = 3;
  s.stem_channels = 4;
  s.stem_kernel = 3;
  s.stem_stride = 2;
  s.stages = {{6, 1, 2}};
  s.anchors.stride = 4;
  s.anchors.sizes = {4, 8};
  s.anchors.ratios = {1.0f};
  s.box_pool = 2;
  s.box_fc = 5;
  s.mask_pool = 2;
  s.mask_channels = 3;
  s.mask_convs = 1;
  s.max_batch = 2;
  s.max_rois = 3;
  s.max_masks = 2;
  if (fpn) {
    s.in_h = s.in_w = 32;
    s.stages = {{6, 1, 2}, {8, 1, 2}};
    s.fpn = true;
    s.fpn_channels = 5;
    s.fpn_canonical_size = 16.0f;
    s.anchors.sizes = {4, 8, 16};
    s.max_rois = 4;
  }
  return s;
}

}  // namespace mlpd::test
