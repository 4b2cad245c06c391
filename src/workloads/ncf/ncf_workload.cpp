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
// Sparse gradients: the four embedding tables are sparse views (workload.h: sparse_rows); a step
// touches the rows of its batch's users (GMF and MLP user tables) and items (both item tables).
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/movielens.h"
#include "datasets/sampling.h"
#include "kernels/device.h"
#include "workloads/ncf/ncf_config.h"
#include "workloads/ncf/ncf_metric.h"
#include "workloads/ncf/ncf_model.h"
#include "workloads/registry.h"

namespace mlpd {

inline constexpr uint64_t kTrainNegativeStream = 0x544E'4547'0000'0000ull;  // "TNEG" + epoch

namespace {

constexpr int kTopK = 10;

struct NcfWorkload final : Workload {
  MovieLensData data;
  std::unique_ptr<NeuMF> net;
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  std::vector<int32_t> users, items;
  std::vector<float> labels;
  Device device = Device::cpu;
  const OpTable* ops = &cpu_ops();
  DeviceBytes device_labels = no_device_bytes();  // [max_batch] on a GPU
  DeviceBytes dlogits = no_device_bytes();        // [max_batch] on the device
  StepLoss step_loss;
  int rank = 0;
  int ranks = 1;
  int negatives = 4;
  uint64_t seed = 0;
  std::vector<uint8_t> seen_users, seen_items;  // all zero between steps (touched_rows)

  void init_parameters(uint64_t init_seed) override { init_neumf(*net, store, init_seed); }
  StepStats train_step(int epoch, int64_t batch, GradReady ready) override;
  EvalPartial evaluate() override;
  // Sums: {hits, users, ndcg}.
  EvalOutcome finish_evaluation(const EvalCombined& c) override {
    return {c.sums.at(0) / c.sums.at(1), {c.sums.at(2) / c.sums.at(1)}, c.sums.at(1)};
  }
};

// out <- the ascending unique values of idx[0, n). seen has one flag per row, all zero, and is left
// so; out has room for n (reserved at build): no allocation in the step.
void touched_rows(const int32_t* idx, int n, std::vector<uint8_t>& seen, std::vector<int32_t>& out) {
  out.clear();
  for (int i = 0; i < n; ++i) {
    const auto r = static_cast<size_t>(idx[i]);
    if (!seen[r]) {
      seen[r] = 1;
      out.push_back(idx[i]);
    }
  }
  std::sort(out.begin(), out.end());
  for (const int32_t r : out) seen[static_cast<size_t>(r)] = 0;
}

}  // namespace

StepStats NcfWorkload::train_step(int epoch, int64_t batch, GradReady ready) {
  NcfWorkload& s = *this;
  if (s.perm_epoch != epoch) {
    epoch_permutation(s.seed, epoch, static_cast<int64_t>(s.data.train_users.size()), s.perm);
    s.perm_epoch = epoch;
  }
  const Slice sl = rank_slice_of_batch(batch, facts.global_batch, s.rank, s.ranks);
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
  // sparse_rows: [gmf_user, gmf_item, mlp_user, mlp_item] (make_ncf_workload).
  touched_rows(s.users.data(), n, s.seen_users, sparse_rows[0].rows);
  touched_rows(s.items.data(), n, s.seen_items, sparse_rows[1].rows);
  sparse_rows[2].rows.assign(sparse_rows[0].rows.begin(), sparse_rows[0].rows.end());
  sparse_rows[3].rows.assign(sparse_rows[1].rows.begin(), sparse_rows[1].rows.end());
  const float* logits = neumf_forward(*s.net, store, s.users.data(), s.items.data(), n);
  StepStats st;
  const float* y = visible_on(s.device, s.labels.data(), as<float>(s.device_labels), static_cast<size_t>(n));
  st.loss = &s.step_loss;
  s.ops->sigmoid_bce(logits, y, n, 1.0f / static_cast<float>(facts.global_batch), as<float>(s.dlogits),
                     begin_step_loss(s.step_loss));
  st.loss_weight = n;
  st.work = n;
  neumf_backward(*s.net, store, s.users.data(), s.items.data(), n, as<float>(s.dlogits),
                 [&ready](size_t view) { ready(view); });
  return st;
}

EvalPartial NcfWorkload::evaluate() {
  NcfWorkload& s = *this;
  const Slice sl = eval_slice(s.data.num_users, s.rank, s.ranks);
  const int c = s.data.eval_negatives + 1;
  double hits = 0.0, users = 0.0, ndcg = 0.0;
  neumf_eval_prepare(*s.net, store);
  const int per_call = neumf_eval_users_per_call(*s.net, c);
  for (int64_t first = sl.begin; first < sl.begin + sl.count; first += per_call) {
    const int k = static_cast<int>(std::min<int64_t>(per_call, sl.begin + sl.count - first));
    for (int j = 0; j < k; ++j) {
      const auto u = static_cast<size_t>(first + j);
      int32_t* it = s.items.data() + static_cast<size_t>(j) * c;
      it[0] = s.data.eval_items[u];
      std::copy_n(s.data.eval_negs.data() + u * s.data.eval_negatives, s.data.eval_negatives, it + 1);
    }
    const float* logits = neumf_score_users(*s.net, store, static_cast<int32_t>(first), k, s.items.data(), c);
    for (int j = 0; j < k; ++j) {
      const HitNdcg h = hit_ndcg_at_k(logits + static_cast<size_t>(j) * c, c, kTopK);
      hits += h.hit ? 1.0 : 0.0;
      ndcg += h.ndcg;
      users += 1;
    }
  }
  return {{hits, users, ndcg}, {}};
}

std::unique_ptr<Workload> make_ncf_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  const NcfConfig cfg = read_ncf_config(config);
  auto s = std::make_unique<NcfWorkload>();
  WorkloadFacts& f = s->facts;
  f.eval_every_epochs = 1;
  s->rank = ctx.rank;
  s->ranks = ctx.ranks;
  s->seed = cfg.seed;
  s->negatives = cfg.train_negatives;
  if (s->negatives < 0) throw UserError("train_negatives must be >= 0", 2);

  s->data = load_movielens(workload_data_path(ctx.data_dir, "ncf", ctx.scale), ctx.scale);
  const auto positives = static_cast<int64_t>(s->data.train_users.size());
  f.train_samples = positives;
  f.eval_samples = s->data.num_users;

  f.global_batch = cfg.global_batch;
  MLPD_CHECK(f.global_batch > 0 && f.global_batch % ctx.ranks == 0, "global batch not checked by the rules");
  f.steps_per_epoch = batches_per_epoch(positives * (s->negatives + 1), f.global_batch);
  const int local = static_cast<int>(f.global_batch / ctx.ranks);

  NeuMFSpec spec;
  spec.users = s->data.num_users;
  spec.items = s->data.num_items;
  spec.mf_dim = cfg.mf_dim;
  spec.mlp_layers = cfg.mlp_layer_sizes;
  // Room for the training slice and for one user's eval list.
  spec.max_batch = std::max(local, s->data.eval_negatives + 1);
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  s->device = ctx.device;
  s->ops = &ops_for(ctx.device, ctx.precision);
  s->net = build_neumf(spec, s->store);
  finalize_params(s->store);
  f.model_summary = neumf_summary(*s->net, s->store) + ", " + std::to_string(s->negatives) +
                    " training negatives per positive";
  f.flops_per_sample = neumf_train_flops_per_sample(*s->net);
  const auto mb = static_cast<size_t>(spec.max_batch);
  s->users.assign(mb, 0);
  s->items.assign(mb, 0);
  s->labels.assign(mb, 0.0f);
  s->dlogits = alloc_on(ctx.device, sizeof(float) * mb);
  s->step_loss = make_step_loss(ctx.device, 1);
  const NeuMF& net = *s->net;
  const auto F = static_cast<size_t>(spec.mf_dim), E = static_cast<size_t>(spec.mlp_layers[0] / 2);
  s->sparse_rows = {{net.gmf_user, F, {}}, {net.gmf_item, F, {}}, {net.mlp_user, E, {}}, {net.mlp_item, E, {}}};
  for (SparseRows& r : s->sparse_rows) r.rows.reserve(mb);
  s->seen_users.assign(static_cast<size_t>(spec.users), 0);
  s->seen_items.assign(static_cast<size_t>(spec.items), 0);
  if (ctx.device != Device::cpu) s->device_labels = alloc_on(ctx.device, sizeof(float) * mb);
  return s;
}

}  // namespace mlpd
