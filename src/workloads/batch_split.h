// How a rank's share of the global batch is cut into batch-norm groups (MLPerf's model_bn_span):
// `micro_batches` forwards of `span` samples per rank per step. Micro-batch m of rank r is
// "virtual rank" r*M+m, so M micro-batches on one rank see the samples and batch-norm groups of M
// times as many ranks (resnet, ssd and minigo train to the same parameters either way).
#pragma once
#include <cstdint>

namespace mlpd {

struct BatchSplit {
  int span = 0;           // samples per forward: model_bn_span, or the rank's whole share when 0
  int micro_batches = 1;  // forwards per rank per step
};

// The rules table has checked the batch against the ranks and the span against the batch: a
// violation here is a bug (MLPD_CHECK), not a user error.
BatchSplit split_rank_batch(int64_t global_batch, int ranks, int64_t bn_span);

}  // namespace mlpd
