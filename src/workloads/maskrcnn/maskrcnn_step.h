// One training forward/backward of Mask R-CNN: the networks (maskrcnn_model.h) and the box logic
// between them (rcnn_boxes.h; the RPN's loss and proposals as device ops) composed as the
// references train: RPN targets and loss, proposals from the RPN's current outputs (no gradient
// through them), RoIs sampled from the proposals plus the ground truth, box head loss (softmax
// cross-entropy averaged over the image's RoIs, smooth-L1 of the foreground's class deltas), mask
// head loss (per-pixel binary cross-entropy of the RoI's own class channel against the mask
// target, averaged over the image's foreground RoIs and pixels).
// Normalisation: every loss is per image as above, summed over the images, and the gradients are
// scaled by grad_scale (the workload passes 1 / global batch): the references average over the
// whole batch at once, which is the same where every image samples the same RoI count.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/tensor.h"
#include "kernels/device.h"
#include "workloads/maskrcnn/maskrcnn_model.h"
#include "workloads/maskrcnn/rcnn_boxes.h"

namespace mlpd {

struct MaskRcnnTrainSpec {
  RpnTargetSpec rpn;
  ProposalSpec proposals;  // training proposals (maskrcnn-benchmark: 2000 per image; ours smaller)
  RoiSampleSpec rois;
  uint64_t seed = 1;
};

// One image's ground truth, in input pixels: boxes [count, 4] (x1, y1, x2, y2), labels 1..K,
// masks[i] a dense [in_h, in_w] 0/1 mask of instance i.
struct ImageTargets {
  std::vector<float> boxes;
  std::vector<int32_t> labels;
  std::vector<const uint8_t*> masks;
  int count() const { return static_cast<int>(labels.size()); }
};

// A batch's five losses, where its loss ops add them: kMaskRcnnLossTerms doubles in the memory of
// the model's device, in this order (a step's loss stays on its device: workloads/step_loss.h).
constexpr int kMaskRcnnLossTerms = 5;  // rpn objectness, rpn box, classifier, box, mask

struct MaskRcnnRows {
  int rois = 0, masks = 0;  // rows through each head: on a GPU their capacity (the sampled rows and
                            // padding; the host does not wait to learn the count)
};

// The losses on the host (tests and tools): from the five terms, read back.
struct MaskRcnnLosses {
  double rpn_objectness = 0, rpn_box = 0, classifier = 0, box = 0, mask = 0;
  int rois = 0, masks = 0;
  double total() const { return rpn_objectness + rpn_box + classifier + box + mask; }
};
MaskRcnnLosses maskrcnn_losses(const double* host_terms, const MaskRcnnRows& rows);

// Host and device buffers of the step (and of inference), sized for the model's limits and the
// proposal counts of training and evaluation.
struct MaskRcnnStepBuffers {
  DeviceBuffers device;
  float *dobjectness = nullptr, *drpn_deltas = nullptr, *dcls = nullptr, *dbox = nullptr, *dmask = nullptr;
  // The RPN's proposals and loss and the box head's loss run on the device (the rpn_proposals,
  // rpn_loss_batch and rcnn_box_loss ops): the anchors and the level bounds of one image, the ops'
  // scratch, the proposals of a forward (boxes, scores, counts), the sampled anchors the host sends
  // (rpn_samples: sample_first [n + 1], positive_first [n + 1], the anchors, then their targets'
  // bits [positives, 4]).
  float* anchors = nullptr;
  std::vector<int32_t> level_first;
  Arena ops_arena;
  int max_proposals = 0, max_rpn_samples = 0;  // per image
  float *proposal_boxes = nullptr, *proposal_scores = nullptr;
  int32_t *proposal_count = nullptr, *rpn_samples = nullptr;
  std::vector<int32_t> h_proposal_count, h_rpn_samples;
  // The heads' RoIs are sampled on the device too (rcnn_sample_rois: rows [max_rois] with their
  // bounds, labels, matched instances and the foreground's targets), and the mask rows made from
  // them with their targets (rcnn_mask_targets), against the batch's ground truth, sent with the
  // batch as input: boxes, labels, first instance per image, masks [instances, in_h, in_w] bytes.
  // The ground-truth buffers and the sampler's scratch grow to the largest batch seen.
  float *roi_rows = nullptr, *roi_targets = nullptr, *mask_rows = nullptr;
  int32_t *roi_first = nullptr, *roi_fg_first = nullptr, *roi_labels = nullptr, *roi_matched = nullptr;
  int32_t *mask_first = nullptr, *mask_labels = nullptr;
  uint8_t* mask_targets = nullptr;
  int gt_capacity = 0, max_gts = 0;  // instances the buffers hold in all and per image
  DeviceBytes gt_boxes = no_device_bytes(), gt_labels = no_device_bytes(), gt_first = no_device_bytes(),
              gt_masks = no_device_bytes();
  Arena sample_arena;
  std::vector<float> h_gt_boxes;
  std::vector<int32_t> h_gt_labels, h_gt_first;
  std::vector<uint8_t> h_gt_masks;
};
// `proposals`: every ProposalSpec the buffers will serve (training's and evaluation's).
MaskRcnnStepBuffers make_step_buffers(const MaskRcnn& net, const RpnTargetSpec& rpn,
                                      const std::vector<ProposalSpec>& proposals);

// The proposals of an RPN forward of n images: the rpn_proposals op queued on the model's device
// into b, then brought to the host (waiting for it), one Proposals per image.
void queue_proposals(MaskRcnn& net, MaskRcnnStepBuffers& b, const ProposalSpec& spec, const RpnOutputs& rpn, int n);
std::vector<Proposals> fetch_proposals(const MaskRcnn& net, MaskRcnnStepBuffers& b, const ProposalSpec& spec, int n);

// Forward and backward of n images x (host [n, in_h, in_w, in_c]) against their targets; `key`
// numbers the batch's images for the sampling (image i draws with key + i). Adds the gradients, and
// the five losses to loss_terms (kMaskRcnnLossTerms doubles on the model's device); ready as
// maskrcnn_backward. Foreground RoIs beyond the model's max_masks are left out of the mask loss (the
// first ones of each image kept, an equal share per image).
MaskRcnnRows maskrcnn_train_batch(MaskRcnn& net, ParamStore& store, Arena& arena, MaskRcnnStepBuffers& b,
                                  const MaskRcnnTrainSpec& spec, const float* x, int n,
                                  const std::vector<ImageTargets>& targets, uint64_t key, float grad_scale,
                                  double* loss_terms, const std::function<void(size_t)>& ready);

}  // namespace mlpd
