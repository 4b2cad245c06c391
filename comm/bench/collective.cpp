#include "comm/bench/collective.h"

namespace mlpd::comm_bench {

const Collective* find_collective(const std::string& name) {
  for (const Collective* c : kCollectives)
    if (name == c->name) return c;
  return nullptr;
}

void fill_rank_scaled(const World& w, float* x, size_t first, size_t n) {
  const float scale = static_cast<float>(w.rank + 1);
  for (size_t i = 0; i < n; ++i) x[i] = scale * input_pattern(first + i);
}

long long count_wrong_sums(const World& w, const float* x, size_t first, size_t n) {
  const float sum_of_scales = rank_factor_sum(w.size);
  long long wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += x[i] != sum_of_scales * input_pattern(first + i);
  return wrong;
}

}  // namespace mlpd::comm_bench
