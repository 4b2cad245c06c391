// The maskrcnn workload: Mask R-CNN on detection scenes (or COCO), box and mask mAP as pycocotools
// computes them. Training: maskrcnn_step.h per forward of `span` images, the losses normalised
// per image and the gradients scaled by 1 / global batch; sampling keyed by the image's position
// in the epoch's permutation, so 1 and N ranks draw the same anchors and RoIs. Evaluation: each
// rank runs inference (maskrcnn_infer.h) on its share of the eval set and sends its detections,
// masks as RLE, as records; rank 0 scores them against the ground truth for bbox and segm.
#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/serialization/vector.hpp>

#include "core/arena.h"
#include "core/check.h"
#include "core/serialize.h"
#include "datasets/sampling.h"
#include "detection/coco_eval.h"
#include "detection/detection_data.h"
#include "detection/detection_ground_truth.h"
#include "detection/rle.h"
#include "kernels/device.h"
#include "mlperf/keys.h"
#include "workloads/batch_split.h"
#include "workloads/detection_input.h"
#include "workloads/maskrcnn/maskrcnn_config.h"
#include "workloads/maskrcnn/maskrcnn_infer.h"
#include "workloads/maskrcnn/maskrcnn_model.h"
#include "workloads/maskrcnn/maskrcnn_step.h"
#include "workloads/registry.h"

namespace mlpd {

namespace {

// One detection as it travels to rank 0: COCO's [x, y, w, h] in pixels and the mask's RLE counts
// (at the image's size).
struct MaskDetRecord {
  int64_t image_id = 0;
  int32_t category = 0;
  float box[4] = {0, 0, 0, 0};
  float score = 0;
  std::vector<uint32_t> counts;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & image_id & category & box & score & counts;
  }
};

// Images per inference call: eval holds up to max_detections masks per image in the mask head.
constexpr int kEvalChunk = 4;

struct MaskrcnnWorkload final : Workload {
  MaskRcnnConfig cfg;
  DetectionSplit train, eval;
  std::unique_ptr<MaskRcnn> net;
  Arena arena;
  MaskRcnnStepBuffers buffers;
  MaskRcnnTrainSpec train_spec;
  MaskRcnnInferSpec infer_spec;
  int rank = 0, ranks = 1;
  int span = 0, micro_batches = 1;
  StepLoss step_loss;  // kMaskRcnnLossTerms per micro-batch
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  std::vector<int64_t> idx;
  DetectionBatch batch;  // evaluation's
  // Training input, per slot of `input`: the dense gt masks of its images and their targets.
  std::vector<std::vector<uint8_t>> masks[2];
  std::vector<ImageTargets> targets[2];
  bool gt_built = false;
  CocoGroundTruth gt;
  DetectionInput input;  // last: its thread is joined before what it fills goes

  void init_parameters(uint64_t seed) override { init_maskrcnn(*net, store, seed); }
  StepStats train_step(int epoch, int64_t step, GradReady ready) override;
  EvalPartial evaluate() override;
  EvalOutcome finish_evaluation(const EvalCombined& c) override;
};

// A training slot's ground truth in pixels, with each instance's mask decoded (and flipped with its
// image).
void build_targets(MaskrcnnWorkload& s, int slot) {
  const DetectionBatch& b = s.input.batch(slot);
  std::vector<std::vector<uint8_t>>& masks = s.masks[slot];
  std::vector<ImageTargets>& targets = s.targets[slot];
  const int H = s.train.h, W = s.train.w;
  const size_t G = b.gt_labels.size();
  if (masks.size() < G) masks.resize(G);
  targets.assign(size_t(b.n), {});
  std::vector<uint8_t> dense(size_t(H) * W);
  for (int i = 0; i < b.n; ++i) {
    ImageTargets& t = targets[size_t(i)];
    for (int g = b.gt_first[size_t(i)]; g < b.gt_first[size_t(i) + 1]; ++g) {
      const float* nb = &b.gt_boxes[size_t(g) * 4];
      t.boxes.insert(t.boxes.end(), {nb[0] * W, nb[1] * H, nb[2] * W, nb[3] * H});
      t.labels.push_back(b.gt_labels[size_t(g)]);
      std::vector<uint8_t>& m = masks[size_t(g)];
      m.resize(size_t(H) * W);
      rle_decode(instance_mask(s.train, b.gt_instance[size_t(g)]), b.flipped[size_t(i)] ? dense.data() : m.data());
      if (b.flipped[size_t(i)])
        for (int y = 0; y < H; ++y)
          for (int x = 0; x < W; ++x) m[size_t(y) * W + x] = dense[size_t(y) * W + (W - 1 - x)];
      t.masks.push_back(m.data());
    }
  }
}

}  // namespace

StepStats MaskrcnnWorkload::train_step(int epoch, int64_t step, GradReady ready) {
  MaskrcnnWorkload& s = *this;
  if (s.perm_epoch != epoch) {
    epoch_permutation(s.cfg.seed, epoch, s.train.count, s.perm);
    s.perm_epoch = epoch;
  }
  const float scale = 1.0f / static_cast<float>(facts.global_batch);
  StepStats st;
  double* terms = begin_step_loss(s.step_loss);
  st.loss = &s.step_loss;
  for (int m = 0; m < s.micro_batches; ++m) {
    const TrainSlot t = s.input.take(epoch, step, m, s.perm.data());  // and the next one starts filling
    const int slot = t.slot, n = static_cast<int>(t.slice.count);
    const Slice& sl = t.slice;
    const uint64_t key = uint64_t(epoch) * uint64_t(s.train.count) + uint64_t(sl.begin);
    const bool last = m + 1 == s.micro_batches;
    maskrcnn_train_batch(*s.net, store, s.arena, s.buffers, s.train_spec, s.input.images(slot), n, s.targets[slot],
                         key, scale, terms + size_t(m) * kMaskRcnnLossTerms, [&ready, last](size_t view) {
                           if (last) ready(view);
                         });
    st.loss_weight += n;
    st.work += n;
  }
  return st;
}

EvalPartial MaskrcnnWorkload::evaluate() {
  MaskrcnnWorkload& s = *this;
  const Slice sl = eval_slice(s.eval.count, s.rank, s.ranks);
  std::vector<MaskDetRecord> records;
  const int chunk = std::min(s.span, kEvalChunk);
  for (int64_t off = 0; off < sl.count; off += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, sl.count - off));
    s.idx.resize(size_t(n));
    for (int i = 0; i < n; ++i) s.idx[size_t(i)] = sl.begin + off + i;
    fill_detection_batch(s.eval, s.idx.data(), n, false, s.cfg.seed, 0, s.batch);
    const std::vector<ImageDetections> dets =
        maskrcnn_infer_batch(*s.net, store, s.arena, s.buffers, s.infer_spec, s.batch.x.data(), n);
    for (int i = 0; i < n; ++i) {
      const int64_t image_id = s.eval.image_ids[size_t(s.idx[size_t(i)])];
      const ImageDetections& d = dets[size_t(i)];
      for (int j = 0; j < d.boxes.count(); ++j) {
        const float* b = &d.boxes.boxes[size_t(j) * 4];
        MaskDetRecord r;
        r.image_id = image_id;
        r.category = d.boxes.labels[size_t(j)];
        r.box[0] = b[0];
        r.box[1] = b[1];
        r.box[2] = b[2] - b[0];
        r.box[3] = b[3] - b[1];
        r.score = d.boxes.scores[size_t(j)];
        r.counts = d.masks[size_t(j)].counts;
        records.push_back(std::move(r));
      }
    }
  }
  EvalPartial p;
  p.records = to_bytes(records);
  return p;
}

EvalOutcome MaskrcnnWorkload::finish_evaluation(const EvalCombined& c) {
  MaskrcnnWorkload& s = *this;
  if (!s.gt_built) {
    s.gt = detection_ground_truth(s.eval, true);
    s.gt_built = true;
  }
  std::vector<CocoDetection> dts;
  for (const std::string& bytes : c.records_by_rank)
    for (MaskDetRecord& r : from_bytes<std::vector<MaskDetRecord>>(bytes)) {
      CocoDetection d;
      d.image_id = r.image_id;
      d.category_id = r.category;
      for (int k = 0; k < 4; ++k) d.bbox[k] = r.box[k];
      d.score = r.score;
      d.has_mask = true;
      d.mask.h = s.eval.h;
      d.mask.w = s.eval.w;
      d.mask.counts = std::move(r.counts);
      dts.push_back(std::move(d));
    }
  const CocoStats box = coco_evaluate(s.gt, dts, CocoIouType::Bbox);
  const CocoStats segm = coco_evaluate(s.gt, dts, CocoIouType::Segm);
  // COCO's AP; an empty category set gives -1: no detections scored.
  return {std::max(0.0, box.stats[0]), {std::max(0.0, segm.stats[0]), std::max(0.0, box.stats[1])},
          static_cast<double>(s.eval.count)};
}

std::unique_ptr<Workload> make_maskrcnn_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  auto w = std::make_unique<MaskrcnnWorkload>();
  MaskrcnnWorkload& s = *w;
  s.cfg = read_maskrcnn_config(config);
  WorkloadFacts& f = s.facts;
  f.work_unit = "img";
  f.eval_kind = EvalKind::Records;
  s.rank = ctx.rank;
  s.ranks = ctx.ranks;
  const std::string path = workload_data_path(ctx.data_dir, keys::kMaskrcnn, ctx.scale);
  s.train = load_detection_split(path, "train");
  s.eval = load_detection_split(path, "eval");
  MLPD_CHECK(s.eval.h == s.train.h && s.eval.w == s.train.w && s.eval.c == s.train.c,
             "eval and train image shapes differ after loading");
  const int classes = s.train.num_classes + 1;
  f.train_samples = s.train.count;
  f.eval_samples = s.eval.count;
  f.global_batch = s.cfg.global_batch;
  const BatchSplit split = split_rank_batch(f.global_batch, ctx.ranks, config.at(keys::kModelBnSpan).get<int64_t>());
  s.span = split.span;
  s.micro_batches = split.micro_batches;
  s.step_loss = make_step_loss(ctx.device, kMaskRcnnLossTerms * s.micro_batches, kMaskRcnnLossTerms);
  f.bn_span = split.span;
  f.steps_per_epoch = batches_per_epoch(s.train.count, f.global_batch);
  if (f.steps_per_epoch == 0) throw UserError("global_batch_size exceeds the training set", 2);

  MaskRcnnTrainSpec& ts = s.train_spec;
  ts.rpn.batch = s.cfg.rpn_batch;
  ts.proposals.pre_nms_topk = s.cfg.rpn_pre_nms_topk_train;
  ts.proposals.post_nms_topk = s.cfg.num_image_candidates;
  ts.proposals.nms_iou = s.cfg.rpn_nms_iou;
  ts.rois.batch = s.cfg.rois_per_image;
  ts.rois.pos_fraction = s.cfg.roi_positive_fraction;
  ts.seed = s.cfg.seed;
  MaskRcnnInferSpec& is = s.infer_spec;
  is.proposals.pre_nms_topk = s.cfg.rpn_pre_nms_topk_test;
  is.proposals.post_nms_topk = s.cfg.rpn_post_nms_topk_test;
  is.proposals.nms_iou = s.cfg.rpn_nms_iou;
  is.detect.score_threshold = s.cfg.score_threshold;
  is.detect.nms_iou = s.cfg.nms_iou_threshold;
  is.detect.max_dets = s.cfg.max_detections;

  // Head rows: training samples rois_per_image RoIs (+ nothing: the ground truth is among the
  // candidates) per image, a quarter foreground; evaluation runs kEvalChunk images at a time.
  const int chunk = std::min(s.span, kEvalChunk);
  const int fg_per_image = static_cast<int>(double(s.cfg.rois_per_image) * double(s.cfg.roi_positive_fraction));
  const int max_rois = std::max(s.cfg.rois_per_image * s.span, s.cfg.rpn_post_nms_topk_test * chunk);
  const int max_masks = std::max({1, fg_per_image * s.span, s.cfg.max_detections * chunk});
  MaskRcnnSpec spec = maskrcnn_spec(s.cfg.model, s.train.h, s.train.w, s.train.c, classes, s.span, max_rois,
                                    max_masks);
  spec.bn_momentum = s.cfg.bn_momentum;
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  s.net = build_maskrcnn(spec, s.store);
  finalize_params(s.store);
  f.model_summary = maskrcnn_summary(*s.net);
  f.flops_per_sample = 3.0 * (maskrcnn_backbone_flops(*s.net) +
                              s.cfg.rois_per_image * maskrcnn_box_flops_per_roi(*s.net) +
                              fg_per_image * maskrcnn_mask_flops_per_roi(*s.net));
  f.logged_params.push_back({keys::kNumImageCandidates, s.cfg.num_image_candidates, nullptr});
  // The images' sides as the model sees them (closed_maskrcnn.yaml requires both keys; the
  // reference resizes to a shorter side of 800 and a longer one of at most 1333).
  f.logged_params.push_back({keys::kMinImageSize, std::min(s.train.h, s.train.w), nullptr});
  f.logged_params.push_back({keys::kMaxImageSize, std::max(s.train.h, s.train.w), nullptr});
  arena_init_on(ctx.device, s.arena, maskrcnn_arena_bytes(*s.net));
  s.buffers = make_step_buffers(*s.net, s.train_spec.rpn, {s.train_spec.proposals, s.infer_spec.proposals});
  MaskrcnnWorkload* self = &s;
  s.input.start(
      [self](int slot, int epoch, const int64_t* idx, int n) {
        fill_detection_batch(self->train, idx, n, self->cfg.augment_flip, self->cfg.seed, epoch,
                             self->input.batch(slot));
        build_targets(*self, slot);
      },
      s.span, size_t(s.train.h) * s.train.w * s.train.c, ctx.device,
      MicroBatchLayout{s.rank, s.ranks, s.micro_batches, f.global_batch, f.steps_per_epoch});
  f.activation_bytes = int64_t(maskrcnn_activation_bytes(*s.net) + s.buffers.device.bytes);
  f.scratch_bytes = int64_t(s.arena.capacity + s.buffers.ops_arena.capacity);
  return w;
}

}  // namespace mlpd
