#include "train/evaluate.h"

#include <algorithm>

#include "comm/collectives.h"
#include "comm/gather_strings.h"
#include "core/check.h"

namespace mlpd {

EvalOutcome evaluate_everywhere(const World& w, Workload& wl, size_t secondary_count) {
  EvalPartial part = wl.evaluate();
  EvalCombined all;
  if (wl.facts.eval_kind == EvalKind::Sums) {
    all.sums = std::move(part.sums);
    allreduce_sum_doubles(w, all.sums.data(), all.sums.size());
    EvalOutcome o = wl.finish_evaluation(all);
    MLPD_CHECK(o.secondary.size() == secondary_count, "finish_evaluation returned the wrong number of secondary metrics");
    return o;
  }
  all.records_by_rank = gather_strings(w, part.records);
  std::vector<double> packed(2 + secondary_count, 0.0);
  if (w.rank == 0) {
    EvalOutcome o = wl.finish_evaluation(all);
    MLPD_CHECK(o.secondary.size() == secondary_count, "finish_evaluation returned the wrong number of secondary metrics");
    packed[0] = o.metric;
    packed[1] = o.samples;
    std::copy(o.secondary.begin(), o.secondary.end(), packed.begin() + 2);
  }
  broadcast_bytes(w, packed.data(), packed.size() * sizeof(double), 0);
  return {packed[0], std::vector<double>(packed.begin() + 2, packed.end()), packed[1]};
}

}  // namespace mlpd
