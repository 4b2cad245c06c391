// Mask R-CNN's inference on a batch: proposals from the RPN, the box head on them, detections
// (per-class NMS), then the mask head on the detected boxes, each mask read from its own class's
// channel, passed through a sigmoid and pasted into the image at threshold 0.5 (the references'
// Masker), as COCO RLE.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "detection/rle.h"
#include "workloads/maskrcnn/maskrcnn_model.h"
#include "workloads/maskrcnn/maskrcnn_step.h"
#include "workloads/maskrcnn/rcnn_boxes.h"

namespace mlpd {

struct MaskRcnnInferSpec {
  ProposalSpec proposals;  // test-time proposals (maskrcnn-benchmark: 1000 per image)
  DetectSpec detect;
  float mask_threshold = 0.5f;
};

struct ImageDetections {
  Detections boxes;        // pixels (x1, y1, x2, y2)
  std::vector<Rle> masks;  // one per detection, at the input's size
};

// n images x (host [n, in_h, in_w, in_c]); eval-mode forwards; the proposals by the device op in
// b (made with spec.proposals among its proposal specs). Detections beyond the model's max_rois
// (box head) or max_masks (mask head) per batch are left out, in image order.
std::vector<ImageDetections> maskrcnn_infer_batch(MaskRcnn& net, ParamStore& store, Arena& arena,
                                                  MaskRcnnStepBuffers& b, const MaskRcnnInferSpec& spec,
                                                  const float* x, int n);

}  // namespace mlpd
