// The resnet workload: ResNet on images, top-1 accuracy. Binds the dataset (sharded, augmented,
// prefetched) to the model and the loss; knows nothing of ranks beyond its share of each batch.
#include <algorithm>
#include <vector>

#include "core/arena.h"
#include "core/check.h"
#include "datasets/image_dataset.h"
#include "datasets/prefetcher.h"
#include "datasets/sampling.h"
#include "kernels/device.h"
#include "workloads/resnet/resnet_config.h"
#include "workloads/resnet/resnet_model.h"
#include "workloads/batch_split.h"
#include "workloads/registry.h"

namespace mlpd {

namespace {

struct ResnetWorkload final : Workload {
  ImageSplit train;
  ImageSplit eval;
  std::unique_ptr<ResNet> net;
  Arena arena;
  AugmentSpec train_aug;
  AugmentSpec eval_aug;
  BatchPrefetcher prefetcher;
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  std::vector<float> eval_x;
  std::vector<int32_t> eval_y;
  Device device = Device::cpu;
  const OpTable* ops = &cpu_ops();
  DeviceBytes labels = no_device_bytes();   // [span] int32 on the device (CUDA only)
  DeviceBytes dlogits = no_device_bytes();  // [span, classes] on the device
  StepLoss step_loss;
  int rank = 0;
  int ranks = 1;
  int micro_batches = 1;  // per rank per step
  int span = 0;           // samples per micro-batch
  int classes = 0;
  float label_smoothing = 0.0f;
  uint64_t seed = 0;
  // The micro-batch the prefetcher is filling: (epoch, batch, micro), or batch -1 for none.
  int pending_epoch = -1;
  int64_t pending_batch = -1;
  int pending_micro = -1;

  void init_parameters(uint64_t init_seed) override { init_resnet(*net, store, init_seed); }
  StepStats train_step(int epoch, int64_t batch, GradReady ready) override;
  EvalPartial evaluate() override;
  EvalOutcome finish_evaluation(const EvalCombined& c) override {
    return {c.sums.at(0) / c.sums.at(1), {}, c.sums.at(1)};
  }
};

void ensure_permutation(ResnetWorkload& s, int epoch) {
  if (s.perm_epoch == epoch) return;
  epoch_permutation(s.seed, epoch, s.train.count, s.perm);
  s.perm_epoch = epoch;
}

// Positions in the epoch's permutation of micro-batch `micro` of this rank in global batch `batch`:
// micro-batch m of rank r is "virtual rank" r*M+m of ranks*M, so a run with M micro-batches per rank
// sees exactly the samples (and batch-norm groups) of a run with M times as many ranks.
void request_micro(ResnetWorkload& s, int epoch, int64_t batch, int micro, int64_t global_batch) {
  ensure_permutation(s, epoch);
  Slice sl = rank_slice_of_batch(batch, global_batch, s.rank * s.micro_batches + micro, s.ranks * s.micro_batches);
  s.prefetcher.request(epoch, s.perm.data() + sl.begin, static_cast<int>(sl.count));
  s.pending_epoch = epoch;
  s.pending_batch = batch;
  s.pending_micro = micro;
}

}  // namespace

StepStats ResnetWorkload::train_step(int epoch, int64_t batch, GradReady ready) {
  ResnetWorkload& s = *this;
  const int64_t global_batch = facts.global_batch;
  StepStats st;
  double* loss = begin_step_loss(s.step_loss);
  st.loss = &s.step_loss;
  for (int m = 0; m < s.micro_batches; ++m) {
    if (s.pending_epoch != epoch || s.pending_batch != batch || s.pending_micro != m) {
      if (s.pending_batch >= 0) s.prefetcher.wait();  // drain a prefetch we will not use
      request_micro(s, epoch, batch, m, global_batch);
    }
    PrefetchedBatch b = s.prefetcher.wait();
    s.pending_batch = -1;
    // Start filling the next micro-batch while this one trains.
    if (m + 1 < s.micro_batches) {
      request_micro(s, epoch, batch, m + 1, global_batch);
    } else if (batch + 1 < facts.steps_per_epoch) {
      request_micro(s, epoch, batch + 1, 0, global_batch);
    }
    arena_reset(s.arena);
    const float* logits = resnet_forward(*s.net, store, s.arena, b.x, b.n, true);
    const float scale = 1.0f / static_cast<float>(global_batch);
    const int32_t* y = visible_on(s.device, b.y, as<int32_t>(s.labels), static_cast<size_t>(b.n));
    s.ops->softmax_xent(logits, y, b.n, s.classes, s.label_smoothing, scale, as<float>(s.dlogits), loss, nullptr);
    st.loss_weight += b.n;
    st.work += b.n;
    // Only the last micro-batch finishes a gradient: earlier ones still accumulate into it.
    const bool last = m + 1 == s.micro_batches;
    resnet_backward(*s.net, store, s.arena, as<float>(s.dlogits), b.n, [&ready, last](size_t view) {
      if (last) ready(view);
    });
  }
  return st;
}

// Sums: {correct, samples}.
EvalPartial ResnetWorkload::evaluate() {
  ResnetWorkload& s = *this;
  Slice sl = eval_slice(s.eval.count, s.rank, s.ranks);
  double correct_sum = 0.0, samples = 0.0;
  std::vector<int64_t> idx(static_cast<size_t>(s.span));
  for (int64_t off = 0; off < sl.count; off += s.span) {
    int n = static_cast<int>(std::min<int64_t>(s.span, sl.count - off));
    for (int i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = sl.begin + off + i;
    fill_image_batch(s.eval, idx.data(), n, s.eval_aug, s.seed, 0, s.eval_x.data(), s.eval_y.data());
    arena_reset(s.arena);
    const float* logits = resnet_forward(*s.net, store, s.arena, s.eval_x.data(), n, false);
    int correct = 0;
    s.ops->softmax_xent(logits, visible_on(s.device, s.eval_y.data(), as<int32_t>(s.labels), static_cast<size_t>(n)), n, s.classes, 0.0f, 1.0f, nullptr, nullptr, &correct);
    correct_sum += correct;
    samples += n;
  }
  return {{correct_sum, samples}, {}};
}

std::unique_ptr<Workload> make_resnet_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  const ResnetConfig cfg = read_resnet_config(config);
  auto s = std::make_unique<ResnetWorkload>();
  WorkloadFacts& f = s->facts;
  f.work_unit = "img";
  f.eval_every_epochs = ctx.scale == "reference" ? 4 : 1;
  s->rank = ctx.rank;
  s->ranks = ctx.ranks;
  s->seed = cfg.seed;
  s->label_smoothing = cfg.label_smoothing;

  const std::string path = workload_data_path(ctx.data_dir, "resnet", ctx.scale);
  s->train = load_image_split(path, "train");
  s->eval = load_image_split(path, "eval");
  // The evaluation buffers below are sized for a training sample; the loader refuses a file whose
  // splits differ, and an eval sample larger than that would be written past them.
  MLPD_CHECK(s->eval.h == s->train.h && s->eval.w == s->train.w && s->eval.c == s->train.c,
             "eval and train sample shapes differ after loading");
  s->classes = s->train.num_classes;
  f.train_samples = s->train.count;
  f.eval_samples = s->eval.count;

  f.global_batch = cfg.global_batch;
  const BatchSplit split = split_rank_batch(f.global_batch, ctx.ranks, cfg.bn_span);
  s->span = split.span;
  s->micro_batches = split.micro_batches;
  f.bn_span = split.span;
  f.steps_per_epoch = batches_per_epoch(s->train.count, f.global_batch);
  if (f.steps_per_epoch == 0) throw UserError("global_batch_size exceeds the training set", 2);

  ResNetSpec spec;
  spec.variant = cfg.model;
  spec.blocks_per_stage = cfg.blocks_per_stage;
  spec.in_h = s->train.h;
  spec.in_w = s->train.w;
  spec.in_c = s->train.c;
  spec.num_classes = s->classes;
  spec.max_batch = s->span;
  spec.bn_momentum = cfg.bn_momentum;
  spec.zero_init_residual_gamma = cfg.zero_init_residual;
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  s->device = ctx.device;
  s->ops = &ops_for(ctx.device, ctx.precision);
  s->net = build_resnet(spec, s->store);
  finalize_params(s->store);
  arena_init_on(ctx.device, s->arena, resnet_arena_bytes(*s->net, s->span));
  f.activation_bytes = int64_t(resnet_activation_bytes(*s->net));
  f.scratch_bytes = int64_t(s->arena.capacity);
  f.model_summary = resnet_summary(*s->net);
  f.flops_per_sample = 3.0 * resnet_flops_per_image(*s->net);  // backward ~ 2x forward

  s->train_aug = AugmentSpec{true, cfg.augment_pad, cfg.augment_flip, s->train.mean, s->train.std};
  s->eval_aug = AugmentSpec{false, 0, false, s->train.mean, s->train.std};
  const size_t sample_floats = static_cast<size_t>(s->train.h) * s->train.w * s->train.c;
  s->eval_x.assign(sample_floats * static_cast<size_t>(s->span), 0.0f);
  s->eval_y.assign(static_cast<size_t>(s->span), 0);
  s->step_loss = make_step_loss(ctx.device, 1);
  s->dlogits = alloc_on(ctx.device, sizeof(float) * static_cast<size_t>(s->span) * static_cast<size_t>(s->classes));
  if (ctx.device != Device::cpu) s->labels = alloc_on(ctx.device, sizeof(int32_t) * static_cast<size_t>(s->span));
  // On a GPU the batches are filled in page-locked memory, so their copy up runs asynchronously (a
  // buffer is refilled only after the step that copied it has synced on its loss).
  BatchPrefetcher::ImageAlloc pinned = nullptr;
  if (ctx.device == Device::cuda) pinned = [](size_t bytes) { return alloc_staging(Device::cuda, bytes); };
  s->prefetcher.start(&s->train, s->train_aug, s->seed, s->span, pinned);
  return s;
}

}  // namespace mlpd
