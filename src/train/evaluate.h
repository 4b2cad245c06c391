// The one evaluation path: a workload's partial (sums or records, workload.h) combined across
// ranks and finished into its metric. Sums are allreduced and finished on every rank; records are
// gathered to rank 0, finished there, and the outcome broadcast, so every rank agrees on whether
// the target is reached.
#pragma once
#include <cstddef>

#include "comm/world.h"
#include "workloads/workload.h"

namespace mlpd {

EvalOutcome evaluate_everywhere(const World& w, Workload& wl, size_t secondary_count);

}  // namespace mlpd
