#include "workloads/batch_split.h"

#include "core/check.h"

namespace mlpd {

BatchSplit split_rank_batch(int64_t global_batch, int ranks, int64_t bn_span) {
  MLPD_CHECK(global_batch > 0 && ranks > 0 && global_batch % ranks == 0, "global batch not checked by the rules");
  const int64_t local = global_batch / ranks;
  const int64_t span = bn_span == 0 ? local : bn_span;
  MLPD_CHECK(span > 0 && local % span == 0, "model_bn_span not checked by the rules");
  return {static_cast<int>(span), static_cast<int>(local / span)};
}

}  // namespace mlpd
