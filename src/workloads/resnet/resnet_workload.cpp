// The resnet workload: ResNet on images, top-1 accuracy. Binds the dataset (sharded, augmented,
// prefetched) to the model and the loss; knows nothing of ranks beyond its share of each batch.
#include <algorithm>
#include <vector>

#include "core/arena.h"
#include "core/check.h"
#include "datasets/image_dataset.h"
#include "datasets/prefetcher.h"
#include "datasets/sampling.h"
#include "kernels/ops.h"
#include "workloads/resnet/resnet_model.h"
#include "workloads/workload.h"

namespace mlpd {

namespace {

struct ResnetState {
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
  std::vector<float> dlogits;
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
};

void ensure_permutation(ResnetState& s, int epoch) {
  if (s.perm_epoch == epoch) return;
  epoch_permutation(s.seed, epoch, s.train.count, s.perm);
  s.perm_epoch = epoch;
}

// Positions in the epoch's permutation of micro-batch `micro` of this rank in global batch `batch`:
// micro-batch m of rank r is "virtual rank" r*M+m of ranks*M, so a run with M micro-batches per rank
// sees exactly the samples (and batch-norm groups) of a run with M times as many ranks.
void request_micro(ResnetState& s, int epoch, int64_t batch, int micro, int64_t global_batch) {
  ensure_permutation(s, epoch);
  Slice sl = rank_slice_of_batch(batch, global_batch, s.rank * s.micro_batches + micro, s.ranks * s.micro_batches);
  s.prefetcher.request(epoch, s.perm.data() + sl.begin, static_cast<int>(sl.count));
  s.pending_epoch = epoch;
  s.pending_batch = batch;
  s.pending_micro = micro;
}

TrainStepStats train_step(ResnetState& s, Workload& w, int epoch, int64_t batch) {
  TrainStepStats st;
  for (int m = 0; m < s.micro_batches; ++m) {
    if (s.pending_epoch != epoch || s.pending_batch != batch || s.pending_micro != m) {
      if (s.pending_batch >= 0) s.prefetcher.wait();  // drain a prefetch we will not use
      request_micro(s, epoch, batch, m, w.global_batch);
    }
    PrefetchedBatch b = s.prefetcher.wait();
    s.pending_batch = -1;
    // Start filling the next micro-batch while this one trains.
    if (m + 1 < s.micro_batches) {
      request_micro(s, epoch, batch, m + 1, w.global_batch);
    } else if (batch + 1 < w.batches_per_epoch) {
      request_micro(s, epoch, batch + 1, 0, w.global_batch);
    }
    arena_reset(s.arena);
    const float* logits = resnet_forward(*s.net, w.store, s.arena, b.x, b.n, true);
    const float scale = 1.0f / static_cast<float>(w.global_batch);
    st.loss_sum += softmax_xent(logits, b.y, b.n, s.classes, s.label_smoothing, scale, s.dlogits.data(), nullptr);
    st.samples += b.n;
    // Only the last micro-batch finishes a gradient: earlier ones still accumulate into it.
    const bool last = m + 1 == s.micro_batches;
    resnet_backward(*s.net, w.store, s.arena, s.dlogits.data(), b.n, [&w, last](size_t view) {
      if (last && w.grad_ready) w.grad_ready(view);
    });
  }
  return st;
}

EvalCounts evaluate(ResnetState& s, Workload& w) {
  Slice sl = eval_slice(s.eval.count, s.rank, s.ranks);
  EvalCounts c;
  std::vector<int64_t> idx(static_cast<size_t>(s.span));
  for (int64_t off = 0; off < sl.count; off += s.span) {
    int n = static_cast<int>(std::min<int64_t>(s.span, sl.count - off));
    for (int i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = sl.begin + off + i;
    fill_image_batch(s.eval, idx.data(), n, s.eval_aug, s.seed, 0, s.eval_x.data(), s.eval_y.data());
    arena_reset(s.arena);
    const float* logits = resnet_forward(*s.net, w.store, s.arena, s.eval_x.data(), n, false);
    int correct = 0;
    softmax_xent(logits, s.eval_y.data(), n, s.classes, 0.0f, 1.0f, nullptr, &correct);
    c.numerator += correct;
    c.denominator += n;
  }
  return c;
}

}  // namespace

std::unique_ptr<Workload> make_resnet_workload(const std::string& scale, const nlohmann::json& cfg,
                                               const WorkloadContext& ctx) {
  auto w = std::make_unique<Workload>();
  auto s = std::make_shared<ResnetState>();
  w->benchmark = "resnet";
  w->scale = scale;
  w->metric_name = "top1";
  w->sample_unit = "img";
  w->eval_every_epochs = scale == "reference" ? 4 : 1;
  s->rank = ctx.rank;
  s->ranks = ctx.ranks;
  s->seed = cfg.at("seed").get<uint64_t>();
  s->label_smoothing = cfg.at("label_smoothing").get<float>();

  const std::string path = workload_data_path(ctx.data_dir, "resnet", scale);
  s->train = load_image_split(path, "train");
  s->eval = load_image_split(path, "eval");
  s->classes = s->train.num_classes;
  w->train_samples = s->train.count;
  w->eval_samples = s->eval.count;

  w->global_batch = cfg.at("global_batch_size").get<int64_t>();
  if (w->global_batch <= 0 || w->global_batch % ctx.ranks != 0)
    throw UserError("global_batch_size " + std::to_string(w->global_batch) + " must be a positive multiple of the " +
                        std::to_string(ctx.ranks) + " ranks",
                    2);
  const int64_t local = w->global_batch / ctx.ranks;
  int64_t span = cfg.at("model_bn_span").get<int64_t>();
  if (span == 0) span = local;
  if (span <= 0 || local % span != 0)
    throw UserError("model_bn_span " + std::to_string(span) + " must divide the per-rank batch " + std::to_string(local), 2);
  s->span = static_cast<int>(span);
  s->micro_batches = static_cast<int>(local / span);
  w->bn_span = span;
  w->batches_per_epoch = batches_per_epoch(s->train.count, w->global_batch);
  if (w->batches_per_epoch == 0) throw UserError("global_batch_size exceeds the training set", 2);

  ResNetSpec spec;
  spec.variant = cfg.at("model").get<std::string>();
  spec.blocks_per_stage = cfg.at("blocks_per_stage").get<int>();
  spec.in_h = s->train.h;
  spec.in_w = s->train.w;
  spec.in_c = s->train.c;
  spec.num_classes = s->classes;
  spec.max_batch = s->span;
  spec.bn_momentum = cfg.at("bn_momentum").get<float>();
  spec.zero_init_residual_gamma = cfg.at("zero_init_residual").get<bool>();
  s->net = build_resnet(spec, w->store);
  finalize_params(w->store);
  arena_init(s->arena, resnet_arena_bytes(*s->net, s->span));
  w->model_summary = resnet_summary(*s->net);
  w->flops_per_sample = 3.0 * resnet_flops_per_image(*s->net);  // backward ~ 2x forward

  s->train_aug = AugmentSpec{true, cfg.at("augment_pad").get<int>(), cfg.at("augment_flip").get<bool>(), s->train.mean, s->train.std};
  s->eval_aug = AugmentSpec{false, 0, false, s->train.mean, s->train.std};
  const size_t sample_floats = static_cast<size_t>(s->train.h) * s->train.w * s->train.c;
  s->eval_x.assign(sample_floats * static_cast<size_t>(s->span), 0.0f);
  s->eval_y.assign(static_cast<size_t>(s->span), 0);
  s->dlogits.assign(static_cast<size_t>(s->span) * static_cast<size_t>(s->classes), 0.0f);
  s->prefetcher.start(&s->train, s->train_aug, s->seed, s->span);

  ResnetState* sp = s.get();
  Workload* wp = w.get();
  w->train_step = [sp, wp](int epoch, int64_t batch) { return train_step(*sp, *wp, epoch, batch); };
  w->evaluate = [sp, wp]() { return evaluate(*sp, *wp); };
  w->init_parameters = [sp, wp](uint64_t seed) { init_resnet(*sp->net, wp->store, seed); };
  w->state = s;
  return w;
}

}  // namespace mlpd
