#include "workloads/maskrcnn/maskrcnn_step.h"

#include <algorithm>

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

MaskRcnnStepBuffers make_step_buffers(const MaskRcnn& net) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  MaskRcnnStepBuffers b;
  b.device.device = sp.device;
  const size_t anchors = maskrcnn_anchors(net).size() / 4;
  const size_t mb = size_t(sp.max_batch), C = size_t(sp.classes);
  const size_t M = size_t(maskrcnn_mask_size(net));
  b.dobjectness = b.device.floats(mb * anchors);
  b.drpn_deltas = b.device.floats(mb * anchors * 4);
  b.dcls = b.device.floats(size_t(sp.max_rois) * C);
  b.dbox = b.device.floats(size_t(sp.max_rois) * C * 4);
  b.dmask = b.device.floats(size_t(sp.max_masks) * M * M * C);
  const size_t mask_pixels = size_t(sp.max_masks) * M * M;
  b.mask_logit = b.device.floats(mask_pixels);
  b.mask_target = b.device.floats(mask_pixels);
  b.dmask_logit = b.device.floats(mask_pixels);
  static_assert(sizeof(int32_t) == sizeof(float));
  b.mask_index = reinterpret_cast<int32_t*>(b.device.floats(mask_pixels));
  return b;
}

MaskRcnnLosses maskrcnn_train_batch(MaskRcnn& net, ParamStore& store, Arena& arena, MaskRcnnStepBuffers& b,
                                    const MaskRcnnTrainSpec& spec, const float* x, int n,
                                    const std::vector<ImageTargets>& targets, uint64_t key, float grad_scale,
                                    const std::function<void(size_t)>& ready) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  MLPD_CHECK(static_cast<int>(targets.size()) == n, "maskrcnn_train_batch: one ImageTargets per image");
  const Device dev = sp.device;
  const int H = sp.in_h, W = sp.in_w, C = sp.classes, M = maskrcnn_mask_size(net);
  const std::vector<float>& anchors = maskrcnn_anchors(net);
  const int AN = static_cast<int>(anchors.size() / 4);
  MaskRcnnLosses L;

  // RPN: targets, loss and proposals per image, from the host copy of its outputs.
  arena_reset(arena);
  const RpnOutputs rpn = maskrcnn_rpn_forward(net, store, arena, x, n, true);
  b.objectness.resize(size_t(n) * AN);
  b.rpn_deltas.resize(size_t(n) * AN * 4);
  copy_to_host(dev, b.objectness.data(), rpn.objectness, sizeof(float) * b.objectness.size());
  copy_to_host(dev, b.rpn_deltas.data(), rpn.deltas, sizeof(float) * b.rpn_deltas.size());
  b.h_dobjectness.assign(b.objectness.size(), 0.0f);
  b.h_drpn_deltas.assign(b.rpn_deltas.size(), 0.0f);
  const std::vector<int> levels = maskrcnn_level_first_anchor(net);
  std::vector<RoiSample> samples(static_cast<size_t>(n));
  b.rois.clear();
  for (int i = 0; i < n; ++i) {
    const ImageTargets& t = targets[size_t(i)];
    const float* obj = b.objectness.data() + size_t(i) * AN;
    const float* del = b.rpn_deltas.data() + size_t(i) * AN * 4;
    const RpnSample rs = sample_rpn_targets(spec.rpn, anchors.data(), AN, t.boxes.data(), t.count(), H, W, spec.seed,
                                            kRpnSampleStream, key + uint64_t(i));
    double cls = 0, box = 0;
    rpn_loss(rs, obj, del, AN, grad_scale, b.h_dobjectness.data() + size_t(i) * AN,
             b.h_drpn_deltas.data() + size_t(i) * AN * 4, &cls, &box);
    L.rpn_objectness += cls;
    L.rpn_box += box;
    const Proposals p = make_level_proposals(spec.proposals, anchors.data(), obj, del, levels, H, W);
    samples[size_t(i)] = sample_rois(spec.rois, p, t.boxes.data(), t.labels.data(), t.count(), spec.seed,
                                     kRoiSampleStream, key + uint64_t(i));
    const RoiSample& s = samples[size_t(i)];
    append_rois(b.rois, i, s.rois.data(), s.count());
  }
  const int R = static_cast<int>(b.rois.size() / 5);
  MLPD_CHECK(R <= sp.max_rois, "maskrcnn: more sampled RoIs than the model's max_rois");

  // Box head.
  MaskRcnnGrads g{nullptr, nullptr, nullptr, nullptr, nullptr};
  if (R > 0) {
    const BoxHeadOutputs bo = maskrcnn_box_forward(net, store, arena, b.rois.data(), R);
    b.cls.resize(size_t(R) * C);
    b.box.resize(size_t(R) * C * 4);
    copy_to_host(dev, b.cls.data(), bo.cls_logits, sizeof(float) * b.cls.size());
    copy_to_host(dev, b.box.data(), bo.deltas, sizeof(float) * b.box.size());
    b.h_dcls.assign(b.cls.size(), 0.0f);
    b.h_dbox.assign(b.box.size(), 0.0f);
    int row = 0;
    for (int i = 0; i < n; ++i) {
      const RoiSample& s = samples[size_t(i)];
      const int k = s.count();
      if (k == 0) continue;
      L.classifier += softmax_xent(b.cls.data() + size_t(row) * C, s.labels.data(), k, C, 0.0f, grad_scale / float(k),
                                   b.h_dcls.data() + size_t(row) * C, nullptr) /
                      k;
      L.box += roi_box_loss(s, b.box.data() + size_t(row) * C * 4, C, grad_scale, b.h_dbox.data() + size_t(row) * C * 4);
      row += k;
    }
    L.rois = R;
    copy_to_device(dev, b.dcls, b.h_dcls.data(), sizeof(float) * b.h_dcls.size());
    copy_to_device(dev, b.dbox, b.h_dbox.data(), sizeof(float) * b.h_dbox.size());
    g.cls_logits = b.dcls;
    g.box_deltas = b.dbox;
  }

  // Mask head on the foreground RoIs (each sample lists its foreground first), an equal share of
  // max_masks per image.
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
  if (F > 0) {
    const float* logits = maskrcnn_mask_forward(net, store, arena, b.mask_rois.data(), F);
    const size_t MM = size_t(M) * M, pixels = size_t(F) * MM;
    b.h_mask_index.clear();
    b.h_mask_target.clear();
    for (int i = 0, row = 0; i < n; ++i)
      for (int r = 0; r < fg[size_t(i)]; ++r, ++row) {
        const size_t label = size_t(samples[size_t(i)].labels[size_t(r)]);
        for (size_t p = 0; p < MM; ++p) b.h_mask_index.push_back(static_cast<int32_t>((row * MM + p) * C + label));
        const float* t = mask_t[size_t(i)].data() + size_t(r) * MM;
        b.h_mask_target.insert(b.h_mask_target.end(), t, t + MM);
      }
    copy_to_device(dev, b.mask_index, b.h_mask_index.data(), sizeof(int32_t) * pixels);
    copy_to_device(dev, b.mask_target, b.h_mask_target.data(), sizeof(float) * pixels);
    const OpTable& o = ops_for(dev);  // the loss in fp32 under either precision
    const int count = static_cast<int>(pixels);
    o.embedding_gather(logits, 1, b.mask_index, count, b.mask_logit, 1);
    // Each image's mask loss is the mean over its rows and pixels.
    for (size_t i = 0, first = 0; i < size_t(n); ++i) {
      const size_t image_pixels = size_t(fg[i]) * MM;
      if (image_pixels == 0) continue;
      const float scale = grad_scale / float(image_pixels);
      L.mask += o.sigmoid_bce(b.mask_logit + first, b.mask_target + first, static_cast<int>(image_pixels), scale,
                              b.dmask_logit + first) /
                double(image_pixels);
      first += image_pixels;
    }
    zero_on(dev, b.dmask, sizeof(float) * pixels * C);
    o.embedding_scatter_add(b.dmask, 1, b.mask_index, count, b.dmask_logit, 1);
    L.masks = F;
    g.mask_logits = b.dmask;
  }

  copy_to_device(dev, b.dobjectness, b.h_dobjectness.data(), sizeof(float) * b.h_dobjectness.size());
  copy_to_device(dev, b.drpn_deltas, b.h_drpn_deltas.data(), sizeof(float) * b.h_drpn_deltas.size());
  g.objectness = b.dobjectness;
  g.rpn_deltas = b.drpn_deltas;
  maskrcnn_backward(net, store, arena, g, ready);
  return L;
}

}  // namespace mlpd
