#include "workloads/maskrcnn/maskrcnn_step.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/op_table.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

// Sampling streams: the RPN's anchors and the heads' RoIs draw from different streams, so the two
// samples of one image are independent.
constexpr uint64_t kRpnSampleStream = 0x5250'4E53'0000'0000ull;  // "RPNS"
constexpr uint64_t kRoiSampleStream = 0x524F'4953'0000'0000ull;  // "ROIS"

}  // namespace

MaskRcnnStepBuffers make_step_buffers(const MaskRcnn& net, const RpnTargetSpec& rpn,
                                      const std::vector<ProposalSpec>& proposals) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  MaskRcnnStepBuffers b;
  b.device.device = sp.device;
  const std::vector<float>& anchors = maskrcnn_anchors(net);
  const size_t A = anchors.size() / 4;
  const size_t mb = size_t(sp.max_batch), C = size_t(sp.classes);
  const size_t M = size_t(maskrcnn_mask_size(net));
  b.dobjectness = b.device.floats(mb * A);
  b.drpn_deltas = b.device.floats(mb * A * 4);
  b.dcls = b.device.floats(size_t(sp.max_rois) * C);
  b.dbox = b.device.floats(size_t(sp.max_rois) * C * 4);
  b.dmask = b.device.floats(size_t(sp.max_masks) * M * M * C);
  static_assert(sizeof(int32_t) == sizeof(float));
  const auto ints = [&b](size_t count) { return reinterpret_cast<int32_t*>(b.device.floats(count)); };
  const size_t R = size_t(sp.max_rois), F = size_t(sp.max_masks);
  b.roi_rows = b.device.floats(R * 5);
  b.roi_targets = b.device.floats(R * 4);
  b.roi_first = ints(mb + 1);
  b.roi_fg_first = ints(mb + 1);
  b.roi_labels = ints(R);
  b.roi_matched = ints(R);
  b.mask_rows = b.device.floats(F * 5);
  b.mask_first = ints(mb + 1);
  b.mask_labels = ints(F);
  b.mask_targets = reinterpret_cast<uint8_t*>(b.device.floats((F * M * M + 3) / 4));

  const OpTable& o = ops_for(sp.device);
  const std::vector<int> first = maskrcnn_level_first_anchor(net);
  b.level_first.assign(first.begin(), first.end());
  const int levels = static_cast<int>(first.size()) - 1;
  b.anchors = b.device.floats(anchors.size());
  copy_to_device(sp.device, b.anchors, anchors.data(), sizeof(float) * anchors.size());
  size_t scratch = std::max({o.rpn_loss_scratch_floats(int(mb)), o.rcnn_box_loss_scratch_floats(int(mb)),
                             o.rcnn_mask_loss_scratch_floats(int(mb), sp.max_masks, int(M * M))});
  for (const ProposalSpec& p : proposals) {
    b.max_proposals = std::max(b.max_proposals, p.post_nms_topk);
    scratch = std::max(scratch, o.rpn_proposals_scratch_floats(int(mb), int(A), levels, p.pre_nms_topk,
                                                               std::max(p.post_nms_topk, 0)));
  }
  arena_init_on(sp.device, b.ops_arena, scratch * sizeof(float) + 4096);
  const size_t P = size_t(b.max_proposals);
  b.proposal_boxes = b.device.floats(mb * P * 4);
  b.proposal_scores = b.device.floats(mb * P);
  b.proposal_count = reinterpret_cast<int32_t*>(b.device.floats(mb));
  b.max_rpn_samples = std::max(rpn.batch, 0);
  b.rpn_samples = ints(2 * (mb + 1) + mb * size_t(b.max_rpn_samples) * 5);
  b.gt_first = alloc_on(sp.device, sizeof(int32_t) * (mb + 1));
  return b;
}

void queue_proposals(MaskRcnn& net, MaskRcnnStepBuffers& b, const ProposalSpec& spec, const RpnOutputs& rpn,
                     int n) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  const Device dev = sp.device;
  const int A = static_cast<int>(maskrcnn_anchors(net).size() / 4), post = std::max(spec.post_nms_topk, 0);
  MLPD_CHECK(post <= b.max_proposals && n <= sp.max_batch, "maskrcnn: the step buffers hold fewer proposals");
  ops_for(dev).rpn_proposals(rpn.objectness, rpn.deltas, b.anchors, n, A, b.level_first.data(),
                             static_cast<int>(b.level_first.size()) - 1, sp.in_h, sp.in_w, spec.pre_nms_topk, post,
                             spec.nms_iou, spec.min_size, b.proposal_boxes, b.proposal_scores, b.proposal_count,
                             b.ops_arena);
}

std::vector<Proposals> fetch_proposals(const MaskRcnn& net, MaskRcnnStepBuffers& b, const ProposalSpec& spec, int n) {
  const Device dev = maskrcnn_spec_of(net).device;
  const int post = std::max(spec.post_nms_topk, 0);
  // The counts first, then each image's proposals alone (not the whole post_nms_topk rows).
  b.h_proposal_count.resize(size_t(n));
  copy_to_host(dev, b.h_proposal_count.data(), b.proposal_count, sizeof(int32_t) * size_t(n));
  std::vector<Proposals> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const size_t c = size_t(b.h_proposal_count[size_t(i)]);
    MLPD_CHECK(c <= size_t(post), "maskrcnn: a proposal count past post_nms_topk");
    out[size_t(i)].boxes.resize(c * 4);
    out[size_t(i)].scores.resize(c);
    copy_to_host(dev, out[size_t(i)].boxes.data(), b.proposal_boxes + size_t(i) * post * 4, sizeof(float) * c * 4);
    copy_to_host(dev, out[size_t(i)].scores.data(), b.proposal_scores + size_t(i) * post, sizeof(float) * c);
  }
  return out;
}

MaskRcnnLosses maskrcnn_losses(const double* t, const MaskRcnnRows& rows) {
  return {t[0], t[1], t[2], t[3], t[4], rows.rois, rows.masks};
}

namespace {

// The batch's ground truth into the step's buffers (grown where this batch has more instances than
// any before it) and sent to the model's device with the batch.
void send_ground_truth(MaskRcnnStepBuffers& b, const MaskRcnnSpec& sp, const std::vector<ImageTargets>& targets) {
  const Device dev = sp.device;
  const size_t HW = size_t(sp.in_h) * sp.in_w;
  const int n = static_cast<int>(targets.size());
  b.h_gt_boxes.clear();
  b.h_gt_labels.clear();
  b.h_gt_masks.clear();
  b.h_gt_first.assign(1, 0);
  int most = 0;
  for (const ImageTargets& t : targets) {
    MLPD_CHECK(t.boxes.size() == size_t(t.count()) * 4 && t.masks.size() == size_t(t.count()),
               "maskrcnn: an image's targets disagree in count");
    b.h_gt_boxes.insert(b.h_gt_boxes.end(), t.boxes.begin(), t.boxes.end());
    b.h_gt_labels.insert(b.h_gt_labels.end(), t.labels.begin(), t.labels.end());
    for (const uint8_t* m : t.masks) {
      MLPD_CHECK(m != nullptr, "maskrcnn: an instance without its mask");
      b.h_gt_masks.insert(b.h_gt_masks.end(), m, m + HW);
    }
    b.h_gt_first.push_back(b.h_gt_first.back() + t.count());
    most = std::max(most, t.count());
  }
  const int total = b.h_gt_first.back();
  if (total > b.gt_capacity || most > b.max_gts) {  // grow (by half again, so growth is rare)
    b.gt_capacity = std::max(total, b.gt_capacity + b.gt_capacity / 2);
    b.max_gts = std::max(most, b.max_gts + b.max_gts / 2);
    const size_t G = size_t(std::max(b.gt_capacity, 1));
    b.gt_boxes = alloc_on(dev, sizeof(float) * G * 4);
    b.gt_labels = alloc_on(dev, sizeof(int32_t) * G);
    b.gt_masks = alloc_on(dev, G * HW);
    const size_t scratch = ops_for(dev).rcnn_sample_rois_scratch_floats(sp.max_batch, b.max_proposals, b.max_gts);
    arena_init_on(dev, b.sample_arena, scratch * sizeof(float) + 4096);
  }
  copy_to_device(dev, b.gt_boxes.get(), b.h_gt_boxes.data(), sizeof(float) * b.h_gt_boxes.size());
  copy_to_device(dev, b.gt_labels.get(), b.h_gt_labels.data(), sizeof(int32_t) * b.h_gt_labels.size());
  copy_to_device(dev, b.gt_first.get(), b.h_gt_first.data(), sizeof(int32_t) * size_t(n + 1));
  copy_to_device(dev, b.gt_masks.get(), b.h_gt_masks.data(), b.h_gt_masks.size());
}

}  // namespace

MaskRcnnRows maskrcnn_train_batch(MaskRcnn& net, ParamStore& store, Arena& arena, MaskRcnnStepBuffers& b,
                                  const MaskRcnnTrainSpec& spec, const float* x, int n,
                                  const std::vector<ImageTargets>& targets, uint64_t key, float grad_scale,
                                  double* loss_terms, const std::function<void(size_t)>& ready) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  MLPD_CHECK(static_cast<int>(targets.size()) == n, "maskrcnn_train_batch: one ImageTargets per image");
  MLPD_CHECK(spec.rpn.batch <= b.max_rpn_samples, "maskrcnn: the step buffers hold fewer RPN samples");
  MLPD_CHECK(int64_t(n) * spec.rois.batch <= sp.max_rois, "maskrcnn: more RoIs to sample than the model's max_rois");
  MLPD_CHECK(n >= 1 && n <= sp.max_batch, "maskrcnn_train_batch: batch outside [1, max_batch]");
  const Device dev = sp.device;
  const bool on_host = dev == Device::cpu;  // the ops' outputs are host memory: their counts are read
  const OpTable& o = ops_for(dev);  // the losses in fp32 under either precision
  const int H = sp.in_h, W = sp.in_w, C = sp.classes, M = maskrcnn_mask_size(net);
  const std::vector<float>& anchors = maskrcnn_anchors(net);
  const int AN = static_cast<int>(anchors.size() / 4);
  MaskRcnnRows L;

  arena_reset(arena);
  const RpnOutputs rpn = maskrcnn_rpn_forward(net, store, arena, x, n, true);
  queue_proposals(net, b, spec.proposals, rpn, n);
  // The RPN's anchor targets come from the anchors and the ground truth alone: sampled on the host
  // while the device runs the forward and the proposals, sent in one copy (sample bounds, anchors,
  // targets' bits).
  std::vector<int32_t>& h = b.h_rpn_samples;
  h.assign(2 * size_t(n + 1), 0);
  std::vector<float> target_deltas;
  for (int i = 0; i < n; ++i) {
    const ImageTargets& t = targets[size_t(i)];
    const RpnSample rs = sample_rpn_targets(spec.rpn, anchors.data(), AN, t.boxes.data(), t.count(), H, W, spec.seed,
                                            kRpnSampleStream, key + uint64_t(i));
    h.insert(h.end(), rs.index.begin(), rs.index.end());
    h[size_t(i) + 1] = h[size_t(i)] + static_cast<int32_t>(rs.index.size());
    h[size_t(n + 1) + size_t(i) + 1] = h[size_t(n + 1) + size_t(i)] + rs.positives;
    target_deltas.insert(target_deltas.end(), rs.deltas.begin(), rs.deltas.end());
  }
  const size_t at_targets = h.size();
  h.resize(at_targets + target_deltas.size());
  std::memcpy(h.data() + at_targets, target_deltas.data(), sizeof(float) * target_deltas.size());
  copy_to_device(dev, b.rpn_samples, h.data(), sizeof(int32_t) * h.size());
  const int32_t* dev_samples = b.rpn_samples;
  o.rpn_loss_batch(rpn.objectness, rpn.deltas, n, AN, dev_samples + 2 * (n + 1), dev_samples, dev_samples + (n + 1),
                   reinterpret_cast<const float*>(dev_samples + at_targets), grad_scale, b.dobjectness, b.drpn_deltas,
                   loss_terms, b.ops_arena);

  // The heads' RoIs sampled from the proposals and the ground truth, where the proposals are: on a
  // GPU the host learns neither how many RoIs nor how many masks, and the heads run on every row
  // the sample may fill (n * rois.batch; the rest is zero, with zero gradients).
  send_ground_truth(b, sp, targets);
  const RoiSampleSpec& rs = spec.rois;
  const RoiSampling sampling{rs.batch, rs.pos_fraction, rs.fg_iou, rs.bg_iou_hi, rs.bg_iou_lo,
                             spec.seed, kRoiSampleStream, key};
  const int post = std::max(spec.proposals.post_nms_topk, 0);
  o.rcnn_sample_rois(sampling, b.proposal_boxes, b.proposal_count, post, as<float>(b.gt_boxes),
                     as<int32_t>(b.gt_labels), as<int32_t>(b.gt_first), n, b.max_gts, sp.max_rois, b.roi_rows,
                     b.roi_first, b.roi_fg_first, b.roi_labels, b.roi_matched, b.roi_targets, b.sample_arena);
  const int R = on_host ? b.roi_first[n] : n * rs.batch;
  MaskRcnnGrads g{nullptr, nullptr, nullptr, nullptr, nullptr};
  BoxHeadOutputs bo;
  if (R > 0) bo = maskrcnn_box_forward(net, store, arena, b.roi_rows, R, true);

  // Mask head on each image's first foreground RoIs, an equal share of max_masks per image, their
  // targets made on the device from the instances' masks.
  const int share = std::min(sp.max_masks / n, sample_max_positives(rs.batch, rs.pos_fraction));
  o.rcnn_mask_targets(b.roi_rows, b.roi_first, b.roi_fg_first, b.roi_labels, b.roi_matched, n, share,
                      as<uint8_t>(b.gt_masks), as<int32_t>(b.gt_first), H, W, M, sp.max_masks, b.mask_rows,
                      b.mask_first, b.mask_labels, b.mask_targets);
  const int F = on_host ? b.mask_first[n] : n * share;
  const float* mask_logits = nullptr;
  if (F > 0) mask_logits = maskrcnn_mask_forward(net, store, arena, b.mask_rows, F, true);

  // Both heads' losses, queued behind both heads, added on the device. rcnn_box_loss writes the
  // sampled rows' gradients; the padding rows' stay zero.
  if (R > 0) {
    if (!on_host) {
      zero_on(dev, b.dcls, sizeof(float) * size_t(R) * C);
      zero_on(dev, b.dbox, sizeof(float) * size_t(R) * C * 4);
    }
    o.rcnn_box_loss(bo.cls_logits, bo.deltas, n, C, b.roi_labels, b.roi_first, b.roi_fg_first, b.roi_targets,
                    grad_scale, b.dcls, b.dbox, loss_terms + 2, b.ops_arena);
    L.rois = R;
    g.cls_logits = b.dcls;
    g.box_deltas = b.dbox;
  }
  if (F > 0) {
    o.rcnn_mask_loss(mask_logits, n, F, M * M, C, b.mask_labels, b.mask_targets, b.mask_first, grad_scale, b.dmask,
                     loss_terms + 4, b.ops_arena);
    L.masks = F;
    g.mask_logits = b.dmask;
  }

  g.objectness = b.dobjectness;
  g.rpn_deltas = b.drpn_deltas;
  maskrcnn_backward(net, store, arena, g, ready);
  return L;
}

}  // namespace mlpd
