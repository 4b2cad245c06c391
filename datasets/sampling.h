// Sharded sampling for data parallelism. Every rank computes the same seeded permutation of the
// training set each epoch; global batch b is positions [b*G, (b+1)*G) of it, and rank r of R
// takes the r-th contiguous G/R of those. So the union over ranks of one step's samples is the
// same whatever R is, and (with augmentation keyed by sample, see fill_image_batch) so is the
// data: a run at 1 and at N ranks sees identical global batches.
#pragma once
#include <cstdint>
#include <vector>

namespace mlpd {

// RNG stream tags (core/rng.h): stream = tag + epoch. Distinct high bits keep the shuffle and the
// augmentation draws apart from each other and from small streams used for initialisation.
inline constexpr uint64_t kShuffleStream = 0x5348'5546'0000'0000ull;  // "SHUF"
inline constexpr uint64_t kAugmentStream = 0x4155'474D'0000'0000ull;  // "AUGM"

struct Slice {
  int64_t begin = 0;
  int64_t count = 0;
};

// perm = a permutation of [0, n), a Fisher-Yates shuffle driven by rng_below(seed,
// kShuffleStream + epoch, i): identical on every rank, different for each epoch and seed.
// Reuses perm's storage (no allocation once it has held n elements).
void epoch_permutation(uint64_t seed, int epoch, int64_t n, std::vector<int64_t>& perm);

// Positions in the epoch permutation that `rank` uses for global batch `batch_index`.
// UserError unless global_batch % ranks == 0 (and the arguments are in range).
Slice rank_slice_of_batch(int64_t batch_index, int64_t global_batch, int rank, int ranks);

// Full global batches in an epoch of n samples: the last partial batch is dropped, so no sample
// is seen twice in an epoch. UserError if global_batch < 1 or global_batch > n.
int64_t batches_per_epoch(int64_t n, int64_t global_batch);

// This rank's contiguous share of an eval set of n samples (in file order). The first n % ranks
// ranks take one extra sample, so every sample is evaluated exactly once.
Slice eval_slice(int64_t n, int rank, int ranks);

}  // namespace mlpd
