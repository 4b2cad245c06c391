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
  const size_t mask_pixels = size_t(sp.max_masks) * M * M;
  static_assert(sizeof(int32_t) == sizeof(float));
  b.mask_samples = reinterpret_cast<int32_t*>(b.device.floats(mb + 1 + size_t(sp.max_masks)));
  b.mask_targets = reinterpret_cast<uint8_t*>(b.device.floats((mask_pixels + 3) / 4));

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
  b.rpn_samples = reinterpret_cast<int32_t*>(b.device.floats(2 * (mb + 1) + mb * size_t(b.max_rpn_samples) * 5));
  b.roi_samples = reinterpret_cast<int32_t*>(b.device.floats(2 * (mb + 1) + size_t(sp.max_rois) * 5));
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

MaskRcnnRows maskrcnn_train_batch(MaskRcnn& net, ParamStore& store, Arena& arena, MaskRcnnStepBuffers& b,
                                  const MaskRcnnTrainSpec& spec, const float* x, int n,
                                  const std::vector<ImageTargets>& targets, uint64_t key, float grad_scale,
                                  double* loss_terms, const std::function<void(size_t)>& ready) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  MLPD_CHECK(static_cast<int>(targets.size()) == n, "maskrcnn_train_batch: one ImageTargets per image");
  MLPD_CHECK(spec.rpn.batch <= b.max_rpn_samples, "maskrcnn: the step buffers hold fewer RPN samples");
  const Device dev = sp.device;
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

  // The heads' RoIs sampled from the proposals.
  const std::vector<Proposals> proposals = fetch_proposals(net, b, spec.proposals, n);
  std::vector<RoiSample> samples(static_cast<size_t>(n));
  b.rois.clear();
  for (int i = 0; i < n; ++i) {
    const ImageTargets& t = targets[size_t(i)];
    samples[size_t(i)] = sample_rois(spec.rois, proposals[size_t(i)], t.boxes.data(), t.labels.data(), t.count(),
                                     spec.seed, kRoiSampleStream, key + uint64_t(i));
    const RoiSample& s = samples[size_t(i)];
    append_rois(b.rois, i, s.rois.data(), s.count());
  }
  const int R = static_cast<int>(b.rois.size() / 5);
  MLPD_CHECK(R <= sp.max_rois, "maskrcnn: more sampled RoIs than the model's max_rois");

  // Box head, queued; its loss (below, after the mask head is queued too) on the device from each
  // image's RoI labels and foreground targets, sent in one copy (row bounds, foreground bounds,
  // labels, targets' bits).
  MaskRcnnGrads g{nullptr, nullptr, nullptr, nullptr, nullptr};
  BoxHeadOutputs bo;
  size_t roi_targets_at = 0;
  if (R > 0) {
    bo = maskrcnn_box_forward(net, store, arena, b.rois.data(), R);
    std::vector<int32_t>& hr = b.h_roi_samples;
    hr.assign(2 * size_t(n + 1), 0);
    std::vector<float> roi_targets;
    for (int i = 0; i < n; ++i) {
      const RoiSample& s = samples[size_t(i)];
      hr.insert(hr.end(), s.labels.begin(), s.labels.end());
      hr[size_t(i) + 1] = hr[size_t(i)] + s.count();
      hr[size_t(n + 1) + size_t(i) + 1] = hr[size_t(n + 1) + size_t(i)] + s.foreground;
      roi_targets.insert(roi_targets.end(), s.deltas.begin(), s.deltas.end());
    }
    roi_targets_at = hr.size();
    hr.resize(roi_targets_at + roi_targets.size());
    std::memcpy(hr.data() + roi_targets_at, roi_targets.data(), sizeof(float) * roi_targets.size());
    copy_to_device(dev, b.roi_samples, hr.data(), sizeof(int32_t) * hr.size());
  }

  // Mask head on the foreground RoIs (each sample lists its foreground first), an equal share of
  // max_masks per image: its targets made on the host while the device runs the box head.
  const int share = sp.max_masks / n;
  b.mask_rois.clear();
  std::vector<int> fg(static_cast<size_t>(n));
  std::vector<std::vector<float>> mask_t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    RoiSample s = samples[size_t(i)];
    fg[size_t(i)] = std::min(s.foreground, share);
    if (fg[size_t(i)] == 0) continue;
    s.foreground = fg[size_t(i)];
    s.rois.resize(size_t(s.foreground) * 4);
    s.labels.resize(size_t(s.foreground));
    s.matched.resize(size_t(s.foreground));
    mask_t[size_t(i)] = mask_targets(s, targets[size_t(i)].masks, H, W, M);
    append_rois(b.mask_rois, i, s.rois.data(), s.foreground);
  }
  const int F = static_cast<int>(b.mask_rois.size() / 5);
  const float* mask_logits = nullptr;
  if (F > 0) {
    mask_logits = maskrcnn_mask_forward(net, store, arena, b.mask_rois.data(), F);
    const size_t MM = size_t(M) * M;
    // Each row's image and label, then its 0/1 target as bytes: the device scores the row's own
    // class channel (rcnn_mask_loss).
    std::vector<int32_t>& hs = b.h_mask_samples;
    hs.assign(size_t(n) + 1, 0);
    b.h_mask_targets.clear();
    for (int i = 0; i < n; ++i) {
      hs[size_t(i) + 1] = hs[size_t(i)] + fg[size_t(i)];
      for (int r = 0; r < fg[size_t(i)]; ++r) {
        hs.push_back(samples[size_t(i)].labels[size_t(r)]);
        const float* t = mask_t[size_t(i)].data() + size_t(r) * MM;
        for (size_t p = 0; p < MM; ++p) b.h_mask_targets.push_back(t[p] != 0.0f ? 1 : 0);
      }
    }
    copy_to_device(dev, b.mask_samples, hs.data(), sizeof(int32_t) * hs.size());
    copy_to_device(dev, b.mask_targets, b.h_mask_targets.data(), b.h_mask_targets.size());
  }

  // Both heads' losses, queued behind both heads, added on the device.
  if (R > 0) {
    const int32_t* d = b.roi_samples;
    o.rcnn_box_loss(bo.cls_logits, bo.deltas, n, C, d + 2 * (n + 1), d, d + (n + 1),
                    reinterpret_cast<const float*>(d + roi_targets_at), grad_scale, b.dcls, b.dbox, loss_terms + 2,
                    b.ops_arena);
    L.rois = R;
    g.cls_logits = b.dcls;
    g.box_deltas = b.dbox;
  }
  if (F > 0) {
    o.rcnn_mask_loss(mask_logits, n, F, M * M, C, b.mask_samples + (n + 1), b.mask_targets, b.mask_samples,
                     grad_scale, b.dmask, loss_terms + 4, b.ops_arena);
    L.masks = F;
    g.mask_logits = b.dmask;
  }

  g.objectness = b.dobjectness;
  g.rpn_deltas = b.drpn_deltas;
  maskrcnn_backward(net, store, arena, g, ready);
  return L;
}

}  // namespace mlpd
