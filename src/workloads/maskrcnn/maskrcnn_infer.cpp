#include "workloads/maskrcnn/maskrcnn_infer.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace mlpd {

std::vector<ImageDetections> maskrcnn_infer_batch(MaskRcnn& net, ParamStore& store, Arena& arena,
                                                  MaskRcnnStepBuffers& b, const MaskRcnnInferSpec& spec,
                                                  const float* x, int n) {
  const MaskRcnnSpec& sp = maskrcnn_spec_of(net);
  const Device dev = sp.device;
  const int H = sp.in_h, W = sp.in_w, C = sp.classes, M = maskrcnn_mask_size(net);
  std::vector<ImageDetections> out(static_cast<size_t>(n));

  arena_reset(arena);
  const RpnOutputs rpn = maskrcnn_rpn_forward(net, store, arena, x, n, false);
  queue_proposals(net, b, spec.proposals, rpn, n);
  const std::vector<Proposals> proposals = fetch_proposals(net, b, spec.proposals, n);
  // Box head on every image's proposals, as many as max_rois holds.
  std::vector<float> rois, corners;  // [R, 5] for the head, [R, 4] for the detections
  std::vector<int> first(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const Proposals& p = proposals[size_t(i)];
    const int keep = std::min(p.count(), sp.max_rois - static_cast<int>(rois.size() / 5));
    append_rois(rois, i, p.boxes.data(), keep);
    corners.insert(corners.end(), p.boxes.begin(), p.boxes.begin() + size_t(keep) * 4);
    first[size_t(i) + 1] = static_cast<int>(rois.size() / 5);
  }
  const int R = static_cast<int>(rois.size() / 5);
  if (R == 0) return out;
  const BoxHeadOutputs bo = maskrcnn_box_forward(net, store, arena, rois.data(), R);
  std::vector<float> cls(size_t(R) * C), box(size_t(R) * C * 4);
  copy_to_host(dev, cls.data(), bo.cls_logits, sizeof(float) * cls.size());
  copy_to_host(dev, box.data(), bo.deltas, sizeof(float) * box.size());
  std::vector<float> mask_rois;
  for (int i = 0; i < n; ++i) {
    const int b = first[size_t(i)], k = first[size_t(i) + 1] - b;
    if (k == 0) continue;
    out[size_t(i)].boxes = detect_boxes(spec.detect, corners.data() + size_t(b) * 4, cls.data() + size_t(b) * C,
                                        box.data() + size_t(b) * C * 4, k, C, H, W);
    Detections& d = out[size_t(i)].boxes;
    const int room = sp.max_masks - static_cast<int>(mask_rois.size() / 5);
    if (d.count() > room) {  // keep the highest-scoring ones (detect_boxes sorts by score)
      d.boxes.resize(size_t(std::max(room, 0)) * 4);
      d.scores.resize(size_t(std::max(room, 0)));
      d.labels.resize(size_t(std::max(room, 0)));
    }
    append_rois(mask_rois, i, d.boxes.data(), d.count());
  }
  const int F = static_cast<int>(mask_rois.size() / 5);
  if (F == 0) return out;
  const float* logits = maskrcnn_mask_forward(net, store, arena, mask_rois.data(), F);
  const size_t MM = size_t(M) * M;
  std::vector<float> lg(size_t(F) * MM * C), grid(MM);
  copy_to_host(dev, lg.data(), logits, sizeof(float) * lg.size());
  std::vector<uint8_t> pasted(size_t(H) * W);
  int row = 0;
  for (int i = 0; i < n; ++i) {
    ImageDetections& d = out[size_t(i)];
    for (int j = 0; j < d.boxes.count(); ++j, ++row) {
      const int label = d.boxes.labels[size_t(j)];
      const float* l = lg.data() + size_t(row) * MM * C;
      for (size_t p = 0; p < MM; ++p) grid[p] = 1.0f / (1.0f + std::exp(-l[p * C + size_t(label)]));
      paste_mask(grid.data(), M, d.boxes.boxes.data() + size_t(j) * 4, H, W, spec.mask_threshold, pasted.data());
      d.masks.push_back(rle_encode(pasted.data(), H, W));
    }
  }
  MLPD_CHECK(row == F, "maskrcnn_infer_batch: mask rows out of step with the detections");
  return out;
}

}  // namespace mlpd
