// The ssd workload: SSD on detection scenes (or COCO), box mAP as pycocotools computes it.
// Training: targets are assigned to the priors on the device, the multibox loss (hard negatives
// 3:1) is summed per image over its positives and scaled by 1/global batch. Evaluation: each
// rank decodes its share of the eval set (NMS on the device) and sends its detections as records;
// rank 0 scores them against the ground truth with the COCO evaluator.
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
#include "kernels/device.h"
#include "mlperf/keys.h"
#include "workloads/batch_split.h"
#include "workloads/detection_input.h"
#include "workloads/registry.h"
#include "workloads/ssd/ssd_config.h"
#include "workloads/ssd/ssd_crop.h"
#include "workloads/ssd/ssd_model.h"

namespace mlpd {

namespace {

// One detection as it travels to rank 0: pixels, COCO's [x, y, w, h].
struct DetRecord {
  int64_t image_id = 0;
  int32_t category = 0;
  float box[4] = {0, 0, 0, 0};
  float score = 0;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & image_id & category & box & score;
  }
};

struct SsdWorkload final : Workload {
  SsdConfig cfg;
  DetectionSplit train, eval;
  std::unique_ptr<Ssd> net;
  Arena arena;
  Device device = Device::cpu;
  const OpTable* ops = &cpu_ops();
  int rank = 0, ranks = 1;
  int span = 0;           // images per forward (the batch-norm span)
  int micro_batches = 1;  // forwards per rank per step
  int classes = 0;        // background included
  int priors = 0;
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  std::vector<int64_t> idx;
  DetectionBatch batch;  // evaluation's
  CropScratch crop[2];   // per training slot of `input`
  // On the device (aliases of host vectors on the CPU).
  DeviceBytes priors_dev = no_device_bytes();
  DeviceBytes gt_boxes_dev = no_device_bytes(), gt_labels_dev = no_device_bytes(), gt_first_dev = no_device_bytes();
  DeviceBytes labels_dev = no_device_bytes(), loc_t_dev = no_device_bytes();
  DeviceBytes dconf = no_device_bytes(), dloc = no_device_bytes();
  StepLoss step_loss;
  DeviceBytes det_boxes = no_device_bytes(), det_scores = no_device_bytes(), det_classes = no_device_bytes(),
              det_count = no_device_bytes();
  int64_t max_gts = 0;  // per forward, what the gt buffers hold
  // Rank 0: the eval split's ground truth, built once.
  bool gt_built = false;
  CocoGroundTruth gt;
  DetectionInput input;  // training batches; last: its thread is joined before what it fills goes

  void init_parameters(uint64_t seed) override { init_ssd(*net, store, seed); }
  StepStats train_step(int epoch, int64_t step, GradReady ready) override;
  EvalPartial evaluate() override;
  EvalOutcome finish_evaluation(const EvalCombined& c) override;
};

// The gt arrays of the batch where the ops read them.
void upload_gts(SsdWorkload& s, const DetectionBatch& b) {
  const int64_t g = static_cast<int64_t>(b.gt_labels.size());
  MLPD_CHECK(g <= s.max_gts, "ssd: more boxes in a batch than the buffers were sized for");
  if (s.device == Device::cpu) return;
  copy_to_device(s.device, s.gt_boxes_dev.get(), b.gt_boxes.data(), sizeof(float) * size_t(g) * 4);
  copy_to_device(s.device, s.gt_labels_dev.get(), b.gt_labels.data(), sizeof(int32_t) * size_t(g));
  copy_to_device(s.device, s.gt_first_dev.get(), b.gt_first.data(), sizeof(int32_t) * b.gt_first.size());
}

template <class T>
const T* where(const SsdWorkload& s, const std::vector<T>& host, const DeviceBytes& dev) {
  return s.device == Device::cpu ? host.data() : as<T>(dev);
}

}  // namespace

StepStats SsdWorkload::train_step(int epoch, int64_t step, GradReady ready) {
  SsdWorkload& s = *this;
  if (s.perm_epoch != epoch) {
    epoch_permutation(s.cfg.seed, epoch, s.train.count, s.perm);
    s.perm_epoch = epoch;
  }
  const float scale = 1.0f / static_cast<float>(facts.global_batch);
  StepStats st;
  double* loss = begin_step_loss(s.step_loss);
  st.loss = &s.step_loss;
  for (int m = 0; m < s.micro_batches; ++m) {
    const TrainSlot t = s.input.take(epoch, step, m, s.perm.data());  // and the next one starts filling
    const int slot = t.slot, n = static_cast<int>(t.slice.count);
    const DetectionBatch& batch = s.input.batch(slot);
    upload_gts(s, batch);
    arena_reset(s.arena);
    const SsdOutputs out = ssd_forward(*s.net, store, s.arena, s.input.images(slot), n, true);
    int32_t* labels = as<int32_t>(s.labels_dev);
    float* loc_t = as<float>(s.loc_t_dev);
    s.ops->ssd_assign_targets(as<float>(s.priors_dev), s.priors, where(s, batch.gt_boxes, s.gt_boxes_dev),
                              where(s, batch.gt_labels, s.gt_labels_dev), where(s, batch.gt_first, s.gt_first_dev),
                              n, s.cfg.match_iou_threshold, kSsdVarCenter, kSsdVarSize, labels, loc_t, s.arena);
    s.ops->ssd_multibox_loss(out.conf, out.loc, labels, loc_t, n, s.priors, s.classes, s.cfg.neg_pos_ratio, scale,
                             as<float>(s.dconf), as<float>(s.dloc), loss, nullptr, s.arena);
    st.loss_weight += n;
    st.work += n;
    const bool last = m + 1 == s.micro_batches;
    ssd_backward(*s.net, store, s.arena, as<float>(s.dconf), as<float>(s.dloc), n, [&ready, last](size_t view) {
      if (last) ready(view);
    });
  }
  return st;
}

EvalPartial SsdWorkload::evaluate() {
  SsdWorkload& s = *this;
  const Slice sl = eval_slice(s.eval.count, s.rank, s.ranks);
  std::vector<DetRecord> records;
  const int max_dets = s.cfg.max_detections;
  std::vector<float> boxes(size_t(s.span) * max_dets * 4), scores(size_t(s.span) * max_dets);
  std::vector<int32_t> cls(size_t(s.span) * max_dets), count(size_t(s.span));
  const float W = static_cast<float>(s.eval.w), H = static_cast<float>(s.eval.h);
  for (int64_t off = 0; off < sl.count; off += s.span) {
    const int n = static_cast<int>(std::min<int64_t>(s.span, sl.count - off));
    s.idx.resize(size_t(n));
    for (int i = 0; i < n; ++i) s.idx[size_t(i)] = sl.begin + off + i;
    fill_detection_batch(s.eval, s.idx.data(), n, false, s.cfg.seed, 0, s.batch);
    arena_reset(s.arena);
    const SsdOutputs out = ssd_forward(*s.net, store, s.arena, s.batch.x.data(), n, false);
    s.ops->ssd_detect(out.conf, out.loc, as<float>(s.priors_dev), n, s.priors, s.classes, kSsdVarCenter, kSsdVarSize,
                      s.cfg.score_threshold, s.cfg.nms_iou_threshold, s.cfg.pre_nms_topk, max_dets,
                      as<float>(s.det_boxes), as<float>(s.det_scores), as<int32_t>(s.det_classes),
                      as<int32_t>(s.det_count), s.arena);
    copy_to_host(s.device, boxes.data(), s.det_boxes.get(), sizeof(float) * size_t(n) * max_dets * 4);
    copy_to_host(s.device, scores.data(), s.det_scores.get(), sizeof(float) * size_t(n) * max_dets);
    copy_to_host(s.device, cls.data(), s.det_classes.get(), sizeof(int32_t) * size_t(n) * max_dets);
    copy_to_host(s.device, count.data(), s.det_count.get(), sizeof(int32_t) * size_t(n));
    for (int i = 0; i < n; ++i) {
      const int64_t image_id = s.eval.image_ids[size_t(s.idx[size_t(i)])];
      for (int d = 0; d < count[size_t(i)]; ++d) {
        const size_t k = size_t(i) * max_dets + size_t(d);
        const float* b = &boxes[k * 4];
        DetRecord r;
        r.image_id = image_id;
        r.category = cls[k];
        r.box[0] = b[0] * W;
        r.box[1] = b[1] * H;
        r.box[2] = (b[2] - b[0]) * W;
        r.box[3] = (b[3] - b[1]) * H;
        r.score = scores[k];
        records.push_back(r);
      }
    }
  }
  EvalPartial p;
  p.records = to_bytes(records);
  return p;
}

EvalOutcome SsdWorkload::finish_evaluation(const EvalCombined& c) {
  SsdWorkload& s = *this;
  if (!s.gt_built) {
    s.gt = detection_ground_truth(s.eval);
    s.gt_built = true;
  }
  std::vector<CocoDetection> dts;
  for (const std::string& bytes : c.records_by_rank)
    for (const DetRecord& r : from_bytes<std::vector<DetRecord>>(bytes)) {
      CocoDetection d;
      d.image_id = r.image_id;
      d.category_id = r.category;
      for (int k = 0; k < 4; ++k) d.bbox[k] = r.box[k];
      d.score = r.score;
      dts.push_back(d);
    }
  const CocoStats st = coco_evaluate(s.gt, dts, CocoIouType::Bbox);
  // AP, AP50, AP75 (COCO's first three); an empty category set gives -1: no detections scored.
  const double ap = std::max(0.0, st.stats[0]);
  return {ap, {std::max(0.0, st.stats[1]), std::max(0.0, st.stats[2])}, static_cast<double>(s.eval.count)};
}

std::unique_ptr<Workload> make_ssd_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  auto w = std::make_unique<SsdWorkload>();
  SsdWorkload& s = *w;
  s.cfg = read_ssd_config(config);
  WorkloadFacts& f = s.facts;
  f.work_unit = "img";
  f.eval_kind = EvalKind::Records;
  s.rank = ctx.rank;
  s.ranks = ctx.ranks;
  const std::string path = workload_data_path(ctx.data_dir, keys::kSsd, ctx.scale);
  s.train = load_detection_split(path, "train");
  s.eval = load_detection_split(path, "eval");
  MLPD_CHECK(s.eval.h == s.train.h && s.eval.w == s.train.w && s.eval.c == s.train.c,
             "eval and train image shapes differ after loading");
  s.classes = s.train.num_classes + 1;
  f.train_samples = s.train.count;
  f.eval_samples = s.eval.count;

  f.global_batch = s.cfg.global_batch;
  const BatchSplit split = split_rank_batch(f.global_batch, ctx.ranks, config.at(keys::kModelBnSpan).get<int64_t>());
  s.span = split.span;
  s.micro_batches = split.micro_batches;
  f.bn_span = split.span;
  f.steps_per_epoch = batches_per_epoch(s.train.count, f.global_batch);
  if (f.steps_per_epoch == 0) throw UserError("global_batch_size exceeds the training set", 2);

  SsdSpec spec = ssd_spec(s.cfg.model, s.train.h, s.train.w, s.train.c, s.classes, s.span);
  spec.bn_momentum = s.cfg.bn_momentum;
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  s.device = ctx.device;
  s.step_loss = make_step_loss(ctx.device, 1);
  s.ops = &ops_for(ctx.device, ctx.precision);
  s.net = build_ssd(spec, s.store);
  finalize_params(s.store);
  s.priors = ssd_num_priors(*s.net);
  f.model_summary = ssd_summary(*s.net);
  f.flops_per_sample = 3.0 * ssd_flops_per_image(*s.net);
  f.logged_params.push_back({keys::kMaxSamples, s.cfg.max_samples, nullptr});

  // The most boxes one forward can carry: every image of the span with the split's most instances.
  int64_t most = 1;
  for (const DetectionSplit* sp : {&s.train, &s.eval})
    for (int64_t i = 0; i < sp->count; ++i)
      most = std::max(most, sp->inst_first[size_t(i) + 1] - sp->inst_first[size_t(i)]);
  s.max_gts = most * s.span;
  const size_t P = size_t(s.priors), C = size_t(s.classes), mb = size_t(s.span), D = size_t(s.cfg.max_detections);
  size_t scratch = std::max({s.ops->ssd_assign_scratch_floats(s.priors, static_cast<int>(s.max_gts)),
                             s.ops->ssd_loss_scratch_floats(s.span, s.priors),
                             s.ops->ssd_detect_scratch_floats(s.span, s.priors, s.classes, s.cfg.pre_nms_topk)});
  arena_init_on(ctx.device, s.arena, std::max(ssd_arena_bytes(*s.net, s.span), scratch * sizeof(float) + 4096));
  f.activation_bytes = int64_t(ssd_activation_bytes(*s.net));
  f.scratch_bytes = int64_t(s.arena.capacity);
  s.priors_dev = alloc_on(ctx.device, sizeof(float) * P * 4);
  copy_to_device(ctx.device, s.priors_dev.get(), ssd_priors(*s.net).data(), sizeof(float) * P * 4);
  if (ctx.device != Device::cpu) {
    s.gt_boxes_dev = alloc_on(ctx.device, sizeof(float) * size_t(s.max_gts) * 4);
    s.gt_labels_dev = alloc_on(ctx.device, sizeof(int32_t) * size_t(s.max_gts));
    s.gt_first_dev = alloc_on(ctx.device, sizeof(int32_t) * (mb + 1));
  }
  s.labels_dev = alloc_on(ctx.device, sizeof(int32_t) * mb * P);
  s.loc_t_dev = alloc_on(ctx.device, sizeof(float) * mb * P * 4);
  s.dconf = alloc_on(ctx.device, sizeof(float) * mb * P * C);
  s.dloc = alloc_on(ctx.device, sizeof(float) * mb * P * 4);
  s.det_boxes = alloc_on(ctx.device, sizeof(float) * mb * D * 4);
  s.det_scores = alloc_on(ctx.device, sizeof(float) * mb * D);
  s.det_classes = alloc_on(ctx.device, sizeof(int32_t) * mb * D);
  s.det_count = alloc_on(ctx.device, sizeof(int32_t) * mb);
  SsdWorkload* self = &s;
  s.input.start(
      [self](int slot, int epoch, const int64_t* idx, int n) {
        DetectionBatch& b = self->input.batch(slot);
        fill_detection_batch(self->train, idx, n, self->cfg.augment_flip, self->cfg.seed, epoch, b);
        random_crop_batch(b, self->train.h, self->train.w, self->train.c, self->cfg.max_samples, self->cfg.seed,
                          epoch, idx, self->crop[slot]);
      },
      s.span, size_t(s.train.h) * s.train.w * s.train.c, ctx.device,
      MicroBatchLayout{s.rank, s.ranks, s.micro_batches, f.global_batch, f.steps_per_epoch});
  return w;
}

}  // namespace mlpd
