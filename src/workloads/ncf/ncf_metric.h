// HR@K and NDCG@K of one user's held-out item ranked against its sampled negatives.
// Tie rule (documented, deterministic, pessimistic): the held-out item's rank is the number of
// negatives that score HIGHER OR EQUAL; it is a hit when that rank is below K. So a tie always
// counts against the model, and a model that scores everything alike hits nothing. A NaN score of
// the held-out item is a miss; NaN negatives are ignored. Scores are logits (before the sigmoid,
// which would saturate in float and create ties that the model did not make).
#pragma once
#include <cstdint>
#include <vector>

#include "datasets/movielens.h"

namespace mlpd {

struct HitNdcg {
  int rank = 0;       // negatives scoring >= the held-out item
  bool hit = false;   // rank < k
  double ndcg = 0.0;  // 1 / log2(rank + 2) on a hit, else 0
};

// scores[0] is the held-out item, scores[1 .. count-1] its negatives.
HitNdcg hit_ndcg_at_k(const float* scores, int count, int k);

// Baselines on the eval set of `d`, with the same tie rule: items scored by their number of
// training positives (popularity), or by uniform random scores (seeded). Returns HR@k; ndcg
// (nullable) receives NDCG@k.
double popularity_hr(const MovieLensData& d, int k, double* ndcg);
double random_hr(const MovieLensData& d, int k, uint64_t seed, double* ndcg);

}  // namespace mlpd
