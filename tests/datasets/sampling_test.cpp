// Sharded sampling: the seeded epoch permutation, rank slices of global batches, eval slices.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "datasets/sampling.h"

using namespace mlpd;

TEST(EpochPermutation, IsAPermutation) {
  std::vector<int64_t> perm;
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    epoch_permutation(42, 3, n, perm);
    ASSERT_EQ(static_cast<int64_t>(perm.size()), n);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(n);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(sorted, iota) << "n=" << n;
  }
}

TEST(EpochPermutation, SameForSameSeedAndEpochDifferentOtherwise) {
  std::vector<int64_t> a, b, c, d;
  epoch_permutation(7, 0, 1000, a);
  epoch_permutation(7, 0, 1000, b);
  EXPECT_EQ(a, b);
  epoch_permutation(7, 1, 1000, c);
  EXPECT_NE(a, c);
  epoch_permutation(8, 0, 1000, d);
  EXPECT_NE(a, d);
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_NE(a, iota);
  // A reused vector gives the same result as a fresh one.
  epoch_permutation(7, 0, 1000, c);
  EXPECT_EQ(a, c);
}

TEST(EpochPermutation, EveryElementCanLandAnywhere) {
  // Over many epochs, each of 10 elements sits at position 0 about 1/10 of the time (a biased
  // shuffle such as Sattolo's, which never leaves an element in place, fails this).
  std::vector<int> at_front(10, 0), stays(10, 0);
  std::vector<int64_t> perm;
  const int epochs = 20000;
  for (int e = 0; e < epochs; ++e) {
    epoch_permutation(123, e, 10, perm);
    ++at_front[perm[0]];
    for (int i = 0; i < 10; ++i) stays[i] += perm[i] == i;
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_GT(at_front[i], 1700) << i;
    EXPECT_LT(at_front[i], 2300) << i;
    EXPECT_GT(stays[i], 1700) << i;
  }
}

TEST(RankSlices, CoverEachPositionOfAnEpochExactlyOnceAtOneTwoThreeRanks) {
  const int64_t n = 1000, global = 48;
  const int64_t batches = batches_per_epoch(n, global);
  ASSERT_EQ(batches, 20);
  for (int ranks : {1, 2, 3}) {
    std::vector<int> seen(n, 0);
    for (int64_t b = 0; b < batches; ++b) {
      int64_t expect_begin = b * global;
      for (int r = 0; r < ranks; ++r) {
        Slice s = rank_slice_of_batch(b, global, r, ranks);
        EXPECT_EQ(s.count, global / ranks);
        EXPECT_EQ(s.begin, expect_begin) << "rank slices are contiguous and in rank order";
        expect_begin += s.count;
        for (int64_t p = s.begin; p < s.begin + s.count; ++p) ++seen[p];
      }
    }
    for (int64_t p = 0; p < n; ++p) EXPECT_EQ(seen[p], p < batches * global ? 1 : 0) << "ranks " << ranks << " p " << p;
  }
}

TEST(RankSlices, RejectIndivisibleGlobalBatchAndBadRanks) {
  EXPECT_THROW(rank_slice_of_batch(0, 50, 0, 3), UserError);
  EXPECT_THROW(rank_slice_of_batch(0, 48, 3, 3), UserError);
  EXPECT_THROW(rank_slice_of_batch(0, 48, -1, 3), UserError);
  EXPECT_THROW(rank_slice_of_batch(0, 0, 0, 1), UserError);
}

TEST(BatchesPerEpoch, DropsTheLastPartialBatch) {
  EXPECT_EQ(batches_per_epoch(60000, 256), 234);
  EXPECT_EQ(batches_per_epoch(60000, 250), 240);
  EXPECT_EQ(batches_per_epoch(10, 10), 1);
  EXPECT_THROW(batches_per_epoch(10, 11), UserError);
  EXPECT_THROW(batches_per_epoch(10, 0), UserError);
}

TEST(EvalSlice, CoversEverySampleExactlyOnce) {
  for (int64_t n : {int64_t{10000}, int64_t{3}, int64_t{0}}) {
    for (int ranks = 1; ranks <= 7; ++ranks) {
      std::vector<int> seen(n, 0);
      int64_t next = 0, lo = n, hi = 0;
      for (int r = 0; r < ranks; ++r) {
        Slice s = eval_slice(n, r, ranks);
        EXPECT_EQ(s.begin, next) << "contiguous, in rank order";
        next = s.begin + s.count;
        lo = std::min(lo, s.count);
        hi = std::max(hi, s.count);
        for (int64_t i = s.begin; i < s.begin + s.count; ++i) ++seen[i];
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1) << "the remainder is spread, one sample each";
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " ranks " << ranks << " i " << i;
    }
  }
  EXPECT_THROW(eval_slice(10, 2, 2), UserError);
}
