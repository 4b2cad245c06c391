#include "datasets/sampling.h"

#include <string>
#include <utility>

#include "core/check.h"
#include "core/rng.h"

namespace mlpd {

void epoch_permutation(uint64_t seed, int epoch, int64_t n, std::vector<int64_t>& perm) {
  if (n < 0) throw UserError("epoch_permutation: negative dataset size " + std::to_string(n));
  perm.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  const uint64_t stream = kShuffleStream + static_cast<uint64_t>(static_cast<uint32_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng_below(seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
}

Slice rank_slice_of_batch(int64_t batch_index, int64_t global_batch, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw UserError("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(ranks) + ")");
  if (global_batch < 1) throw UserError("global batch size must be positive, got " + std::to_string(global_batch));
  if (global_batch % ranks != 0)
    throw UserError("global batch size " + std::to_string(global_batch) + " is not divisible by " +
                    std::to_string(ranks) + " ranks");
  if (batch_index < 0) throw UserError("negative batch index " + std::to_string(batch_index));
  const int64_t per = global_batch / ranks;
  return Slice{batch_index * global_batch + rank * per, per};
}

int64_t batches_per_epoch(int64_t n, int64_t global_batch) {
  if (global_batch < 1) throw UserError("global batch size must be positive, got " + std::to_string(global_batch));
  if (global_batch > n)
    throw UserError("global batch size " + std::to_string(global_batch) + " exceeds the " + std::to_string(n) +
                    " training samples");
  return n / global_batch;
}

Slice eval_slice(int64_t n, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw UserError("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(ranks) + ")");
  if (n < 0) throw UserError("eval_slice: negative eval set size " + std::to_string(n));
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t begin = rank * base + (rank < extra ? rank : extra);
  return Slice{begin, base + (rank < extra ? 1 : 0)};
}

}  // namespace mlpd
