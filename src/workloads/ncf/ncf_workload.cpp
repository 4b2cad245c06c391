// The ncf workload: NeuMF on implicit MovieLens feedback, HR@10 over 999 sampled negatives.
//
// Training set of an epoch: the P training positives in a seeded global permutation
// (epoch_permutation), each followed by its `train_negatives` negatives, so sample s of the epoch
// is positive perm[s / (K+1)] when s % (K+1) == 0, else negative j = s % (K+1) - 1 of it: the same
// user with an item drawn uniformly from all items by rng_below(seed, kTrainNegativeStream + epoch,
// positive * K + j) (MLPerf v0.5's reference draws them the same way, without excluding the
// user's positives). The draw depends on (seed, epoch, positive, j) only, never on the rank, so
// 1 rank and N ranks train on identical global batches. Batches are sliced over ranks with
// rank_slice_of_batch, as resnet does; global_batch_size counts positives and negatives.
// Evaluation: each rank scores its eval_slice of users, counts are summed by the trainer.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/movielens.h"
#include "datasets/sampling.h"
#include "kernels/ncf_ops.h"
#include "workloads/ncf/ncf_metric.h"
#include "workloads/ncf/ncf_model.h"
#include "workloads/workload.h"

namespace mlpd {

inline constexpr uint64_t kTrainNegativeStream = 0x544E'4547'0000'0000ull;  // "TNEG" + epoch

namespace {

constexpr int kTopK = 10;

struct NcfState {
  MovieLensData data;
  std::unique_ptr<NeuMF> net;
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  std::vector<int32_t> users, items;
  std::vector<float> labels, dlogits;
  int rank = 0;
  int ranks = 1;
  int negatives = 4;
  uint64_t seed = 0;
};

TrainStepStats train_step(NcfState& s, Workload& w, int epoch, int64_t batch) {
  if (s.perm_epoch != epoch) {
    epoch_permutation(s.seed, epoch, static_cast<int64_t>(s.data.train_users.size()), s.perm);
    s.perm_epoch = epoch;
  }
  const Slice sl = rank_slice_of_batch(batch, w.global_batch, s.rank, s.ranks);
  const int n = static_cast<int>(sl.count);
  const int64_t group = s.negatives + 1;
  const uint64_t stream = kTrainNegativeStream + static_cast<uint64_t>(static_cast<uint32_t>(epoch));
  const auto items = static_cast<uint64_t>(s.data.num_items);
  for (int i = 0; i < n; ++i) {
    const int64_t v = sl.begin + i;
    const int64_t pos = s.perm[static_cast<size_t>(v / group)];
    const int64_t j = v % group;
    s.users[static_cast<size_t>(i)] = s.data.train_users[static_cast<size_t>(pos)];
    if (j == 0) {
      s.items[static_cast<size_t>(i)] = s.data.train_items[static_cast<size_t>(pos)];
      s.labels[static_cast<size_t>(i)] = 1.0f;
    } else {
      const uint64_t counter = static_cast<uint64_t>(pos) * static_cast<uint64_t>(s.negatives) + static_cast<uint64_t>(j - 1);
      s.items[static_cast<size_t>(i)] = static_cast<int32_t>(rng_below(s.seed, stream, counter, items));
      s.labels[static_cast<size_t>(i)] = 0.0f;
    }
  }
  const float* logits = neumf_forward(*s.net, w.store, s.users.data(), s.items.data(), n);
  TrainStepStats st;
  st.loss_sum = sigmoid_bce(logits, s.labels.data(), n, 1.0f / static_cast<float>(w.global_batch), s.dlogits.data());
  st.samples = n;
  neumf_backward(*s.net, w.store, s.users.data(), s.items.data(), n, s.dlogits.data(), w.grad_ready);
  return st;
}

EvalCounts evaluate(NcfState& s, Workload& w) {
  const Slice sl = eval_slice(s.data.num_users, s.rank, s.ranks);
  const int c = s.data.eval_negatives + 1;
  EvalCounts counts;
  counts.extra.assign(1, 0.0);
  neumf_eval_prepare(*s.net, w.store);
  for (int64_t u = sl.begin; u < sl.begin + sl.count; ++u) {
    int32_t* it = s.items.data();
    it[0] = s.data.eval_items[static_cast<size_t>(u)];
    std::copy_n(s.data.eval_negs.data() + static_cast<size_t>(u) * s.data.eval_negatives, s.data.eval_negatives, it + 1);
    const float* logits = neumf_score_user(*s.net, w.store, static_cast<int32_t>(u), it, c);
    const HitNdcg h = hit_ndcg_at_k(logits, c, kTopK);
    counts.numerator += h.hit ? 1.0 : 0.0;
    counts.extra[0] += h.ndcg;
    counts.denominator += 1;
  }
  return counts;
}

}  // namespace

std::unique_ptr<Workload> make_ncf_workload(const std::string& scale, const nlohmann::json& cfg,
                                            const WorkloadContext& ctx) {
  auto w = std::make_unique<Workload>();
  auto s = std::make_shared<NcfState>();
  w->benchmark = "ncf";
  w->scale = scale;
  w->metric_name = "hr@10";
  w->extra_metric_names = {"ndcg@10"};
  w->eval_every_epochs = 1;
  s->rank = ctx.rank;
  s->ranks = ctx.ranks;
  s->seed = cfg.at("seed").get<uint64_t>();
  s->negatives = cfg.at("train_negatives").get<int>();
  if (s->negatives < 0) throw UserError("train_negatives must be >= 0", 2);

  s->data = load_movielens(workload_data_path(ctx.data_dir, "ncf", scale), scale);
  const auto positives = static_cast<int64_t>(s->data.train_users.size());
  w->train_samples = positives;
  w->eval_samples = s->data.num_users;

  w->global_batch = cfg.at("global_batch_size").get<int64_t>();
  if (w->global_batch <= 0 || w->global_batch % ctx.ranks != 0)
    throw UserError("global_batch_size " + std::to_string(w->global_batch) + " must be a positive multiple of the " +
                        std::to_string(ctx.ranks) + " ranks",
                    2);
  w->batches_per_epoch = batches_per_epoch(positives * (s->negatives + 1), w->global_batch);
  const int local = static_cast<int>(w->global_batch / ctx.ranks);

  NeuMFSpec spec;
  spec.users = s->data.num_users;
  spec.items = s->data.num_items;
  spec.mf_dim = cfg.at("mf_dim").get<int>();
  spec.mlp_layers = cfg.at("mlp_layer_sizes").get<std::vector<int>>();
  // Room for the training slice and for one user's eval list.
  spec.max_batch = std::max(local, s->data.eval_negatives + 1);
  s->net = build_neumf(spec, w->store);
  finalize_params(w->store);
  w->model_summary = neumf_summary(*s->net, w->store) + ", " + std::to_string(s->negatives) +
                     " training negatives per positive";
  w->flops_per_sample = neumf_train_flops_per_sample(*s->net);
  const auto mb = static_cast<size_t>(spec.max_batch);
  s->users.assign(mb, 0);
  s->items.assign(mb, 0);
  s->labels.assign(mb, 0.0f);
  s->dlogits.assign(mb, 0.0f);

  NcfState* sp = s.get();
  Workload* wp = w.get();
  w->train_step = [sp, wp](int epoch, int64_t batch) { return train_step(*sp, *wp, epoch, batch); };
  w->evaluate = [sp, wp]() { return evaluate(*sp, *wp); };
  w->init_parameters = [sp, wp](uint64_t seed) { init_neumf(*sp->net, wp->store, seed); };
  w->state = s;
  return w;
}

}  // namespace mlpd
