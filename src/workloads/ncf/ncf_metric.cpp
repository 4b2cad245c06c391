#include "workloads/ncf/ncf_metric.h"

#include <cmath>

#include "core/rng.h"

namespace mlpd {

HitNdcg hit_ndcg_at_k(const float* scores, int count, int k) {
  HitNdcg r;
  const float s = scores[0];
  if (std::isnan(s)) {
    r.rank = count - 1;
    return r;
  }
  int rank = 0;
  for (int j = 1; j < count; ++j) rank += scores[j] >= s;
  r.rank = rank;
  r.hit = rank < k;
  r.ndcg = r.hit ? 1.0 / std::log2(static_cast<double>(rank) + 2.0) : 0.0;
  return r;
}

namespace {

template <class Score>
double baseline_hr(const MovieLensData& d, int k, double* ndcg, Score score) {
  const int c = d.eval_negatives + 1;
  std::vector<float> s(static_cast<size_t>(c));
  double hits = 0, nd = 0;
  for (int64_t u = 0; u < d.num_users; ++u) {
    s[0] = score(u, d.eval_items[static_cast<size_t>(u)]);
    for (int j = 1; j < c; ++j) s[static_cast<size_t>(j)] = score(u, d.eval_negs[static_cast<size_t>(u) * d.eval_negatives + j - 1]);
    HitNdcg h = hit_ndcg_at_k(s.data(), c, k);
    hits += h.hit;
    nd += h.ndcg;
  }
  const double n = static_cast<double>(d.num_users);
  if (ndcg) *ndcg = nd / n;
  return hits / n;
}

}  // namespace

double popularity_hr(const MovieLensData& d, int k, double* ndcg) {
  std::vector<float> pop(static_cast<size_t>(d.num_items), 0.0f);
  for (int32_t i : d.train_items) pop[static_cast<size_t>(i)] += 1.0f;
  return baseline_hr(d, k, ndcg, [&](int64_t, int32_t item) { return pop[static_cast<size_t>(item)]; });
}

double random_hr(const MovieLensData& d, int k, uint64_t seed, double* ndcg) {
  return baseline_hr(d, k, ndcg, [&](int64_t u, int32_t item) {
    return rng_uniform(seed, static_cast<uint64_t>(u), static_cast<uint64_t>(item));
  });
}

}  // namespace mlpd
