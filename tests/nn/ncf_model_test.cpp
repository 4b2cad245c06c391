// NeuMF: whole-model finite differences (loss = BCE over a batch with repeated users and items,
// w.r.t. every parameter view), and HR@10 / NDCG@10 on hand-made score lists with known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../kernels/grad_check.h"
#include "kernels/ops.h"
#include "workloads/ncf/ncf_metric.h"
#include "workloads/ncf/ncf_model.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

TEST(NeuMF, WholeModelGradientMatchesFiniteDifferences) {
  ParamStore store;
  NeuMFSpec spec;
  spec.users = 3;
  spec.items = 5;
  spec.mf_dim = 4;
  spec.mlp_layers = {6, 5, 3};
  spec.max_batch = 8;
  auto m = build_neumf(spec, store);
  finalize_params(store);
  init_neumf(*m, store, 7);
  // Larger embeddings than the N(0, 0.01) init, so that every path carries a visible gradient.
  for (size_t v : {m->gmf_user, m->gmf_item, m->mlp_user, m->mlp_item})
    for (size_t i = 0; i < store.views[v].count; ++i) param_ptr(store, v)[i] *= 50.0f;
  const std::vector<int32_t> users{0, 2, 2, 1, 0, 2, 1};
  const std::vector<int32_t> items{4, 0, 4, 1, 4, 3, 0};
  const std::vector<float> labels{1, 0, 1, 0, 0, 1, 1};
  const int n = static_cast<int>(users.size());
  std::vector<float> dlogits(n);
  auto loss = [&] {
    const float* z = neumf_forward(*m, store, users.data(), items.data(), n);
    return test::added_loss([&](double* l) { sigmoid_bce(z, labels.data(), n, 1.0f, nullptr, l); });
  };
  const float* z = neumf_forward(*m, store, users.data(), items.data(), n);
  sigmoid_bce(z, labels.data(), n, 1.0f, dlogits.data(), nullptr);
  std::fill(store.grads.begin(), store.grads.end(), 0.0f);
  neumf_backward(*m, store, users.data(), items.data(), n, dlogits.data());
  int nonzero = 0;
  for (float g : store.grads) nonzero += g != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(store.param_count) / 2);
  for (size_t v = 0; v < store.views.size(); ++v) {
    SCOPED_TRACE(store.views[v].name);
    expect_grad_close(store.views[v].name.c_str(), loss, param_ptr(store, v), store.views[v].count, grad_ptr(store, v),
                      3e-3, 2e-2, 2e-4, 200);
  }
  // Item 2 appears in no sample: its embedding rows get no gradient.
  for (size_t v : {m->gmf_item, m->mlp_item}) {
    const size_t dim = store.views[v].count / 5;
    for (size_t j = 0; j < dim; ++j) EXPECT_EQ(grad_ptr(store, v)[2 * dim + j], 0.0f);
  }
}

TEST(NeuMF, EvalScoringMatchesTheTrainingForward) {
  ParamStore store;
  NeuMFSpec spec;
  spec.users = 4;
  spec.items = 9;
  spec.mf_dim = 8;
  spec.mlp_layers = {16, 12, 6};
  spec.max_batch = 9;
  auto m = build_neumf(spec, store);
  finalize_params(store);
  init_neumf(*m, store, 3);
  for (float& p : store.params) p *= 20.0f;  // away from the near-zero init
  const std::vector<int32_t> items{8, 0, 3, 3, 5, 1, 2, 7, 6};
  const int n = static_cast<int>(items.size());
  for (int32_t u = 0; u < 4; ++u) {
    const std::vector<int32_t> users(items.size(), u);
    const float* a = neumf_forward(*m, store, users.data(), items.data(), n);
    const std::vector<float> ref(a, a + n);
    neumf_eval_prepare(*m, store);
    const float* b = neumf_score_users(*m, store, u, 1, items.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(b[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "user " << u << " row " << i;
  }
  // Three users at once, three items each: user 1 + j scores items[3j .. 3j + 2].
  const std::vector<int32_t> users{1, 1, 1, 2, 2, 2, 3, 3, 3};
  const float* a = neumf_forward(*m, store, users.data(), items.data(), n);
  const std::vector<float> ref(a, a + n);
  neumf_eval_prepare(*m, store);
  EXPECT_EQ(neumf_eval_users_per_call(*m, 3), 1);  // the CPU scores a user at a time
  const float* b = neumf_score_users(*m, store, 1, 3, items.data(), 3);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(b[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "three users, row " << i;
  EXPECT_ANY_THROW(neumf_score_users(*m, store, 0, 4, items.data(), 3));  // 12 pairs > max_batch 9
}

TEST(HitRate, HandMadeListsWithKnownAnswers) {
  // 1 held-out + 14 negatives. Held-out 0.5; 9 negatives above: rank 9, a hit, NDCG 1/log2(11).
  std::vector<float> s{0.5f, 0.9f, 0.8f, 0.7f, 0.6f, 0.55f, 0.6f, 0.7f, 0.8f, 0.9f, 0.1f, 0.2f, 0.3f, 0.4f, 0.0f};
  HitNdcg h = hit_ndcg_at_k(s.data(), static_cast<int>(s.size()), 10);
  EXPECT_EQ(h.rank, 9);
  EXPECT_TRUE(h.hit);
  EXPECT_NEAR(h.ndcg, 1.0 / std::log2(11.0), 1e-12);
  // One more negative above: rank 10, a miss.
  s[10] = 0.51f;
  h = hit_ndcg_at_k(s.data(), static_cast<int>(s.size()), 10);
  EXPECT_EQ(h.rank, 10);
  EXPECT_FALSE(h.hit);
  EXPECT_EQ(h.ndcg, 0.0);
  // A tie counts against the held-out item: 9 above + 1 equal = rank 10, a miss.
  s[10] = 0.5f;
  h = hit_ndcg_at_k(s.data(), static_cast<int>(s.size()), 10);
  EXPECT_EQ(h.rank, 10);
  EXPECT_FALSE(h.hit);
  // Best score: rank 0, NDCG 1.
  s[0] = 2.0f;
  h = hit_ndcg_at_k(s.data(), static_cast<int>(s.size()), 10);
  EXPECT_EQ(h.rank, 0);
  EXPECT_TRUE(h.hit);
  EXPECT_EQ(h.ndcg, 1.0);
  // All scores equal: never a hit. NaN held-out: a miss.
  std::vector<float> same(1000, 0.25f);
  EXPECT_FALSE(hit_ndcg_at_k(same.data(), 1000, 10).hit);
  same[0] = std::nanf("");
  EXPECT_FALSE(hit_ndcg_at_k(same.data(), 1000, 10).hit);
}

TEST(HitRate, BaselinesOnASmallDataset) {
  // 2 users, 4 items, 2 negatives each. Popularity: item 0 x3, item 1 x1, items 2-3 x0.
  MovieLensData d;
  d.num_users = 2;
  d.num_items = 4;
  d.eval_negatives = 2;
  d.train_users = {0, 0, 1, 1};
  d.train_items = {0, 1, 0, 0};
  d.eval_items = {0, 2};           // user 0's held-out item is the most popular; user 1's is unpopular
  d.eval_negs = {2, 3, 1, 3};
  double ndcg = 0;
  // k = 1: user 0 hits (rank 0), user 1 misses (item 1 beats it, item 3 ties it).
  EXPECT_DOUBLE_EQ(popularity_hr(d, 1, &ndcg), 0.5);
  EXPECT_DOUBLE_EQ(ndcg, 0.5);
  EXPECT_DOUBLE_EQ(popularity_hr(d, 3, nullptr), 1.0);
}

}  // namespace
