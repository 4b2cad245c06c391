// The detection workloads' double-buffered training input (src/workloads/detection_input.h): a
// prefetched micro-batch comes back without another fill, one that was not prefetched (or another
// than the prefetch) is filled on the caller's thread, the slot being trained on is never touched
// by the prefetch, and on the CPU the images are the batch's own.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "workloads/detection_input.h"

using namespace mlpd;

namespace {

struct FillLog {
  std::mutex mu;
  std::vector<std::thread::id> threads;
};

// Image k of the "split" is 4 floats of value 100 * epoch + k.
DetectionInput::Fill fake_fill(DetectionInput& in, FillLog& log) {
  return [&in, &log](int slot, int epoch, const int64_t* idx, int n) {
    DetectionBatch& b = in.batch(slot);
    b.n = n;
    b.x.assign(size_t(n) * 4, 0.0f);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 4; ++j) b.x[size_t(i) * 4 + j] = float(100 * epoch + idx[i]);
    std::lock_guard<std::mutex> lock(log.mu);
    log.threads.push_back(std::this_thread::get_id());
  };
}

}  // namespace

TEST(DetectionInput, PrefetchedMicroBatchesComeBackFilledAndTheOtherSlotIsLeftAlone) {
  DetectionInput in;
  FillLog log;
  in.start(fake_fill(in, log), 3, 4, Device::cpu, MicroBatchLayout{});
  const std::vector<int64_t> perm{5, 6, 7, 8, 9, 10, 11, 12, 13};
  int slot = in.get({2, 0, 0}, perm.data(), 3);  // not prefetched: filled here
  ASSERT_EQ(log.threads.size(), 1u);
  EXPECT_EQ(log.threads[0], std::this_thread::get_id());
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<float> held(in.images(slot), in.images(slot) + 12);
    EXPECT_EQ(held[0], float(200 + perm[size_t(b) * 3]));
    EXPECT_EQ(in.images(slot), in.batch(slot).x.data());  // the CPU reads the batch itself
    if (b + 1 < 3) in.prefetch({2, b + 1, 0}, perm.data() + (b + 1) * 3, 3);
    // The prefetch fills the other slot while this one is "trained on".
    EXPECT_EQ(std::vector<float>(in.images(slot), in.images(slot) + 12), held);
    if (b + 1 < 3) {
      const int next = in.get({2, b + 1, 0}, perm.data() + (b + 1) * 3, 3);
      EXPECT_NE(next, slot);
      slot = next;
    }
  }
  ASSERT_EQ(log.threads.size(), 3u);
  EXPECT_NE(log.threads[1], std::this_thread::get_id());  // the prefetches ran in the background
  EXPECT_NE(log.threads[2], std::this_thread::get_id());
}

TEST(DetectionInput, AMicroBatchOtherThanThePrefetchIsFilledAnew) {
  DetectionInput in;
  FillLog log;
  in.start(fake_fill(in, log), 2, 4, Device::cpu, MicroBatchLayout{});
  const std::vector<int64_t> idx{1, 2, 3, 4};
  in.get({0, 0, 0}, idx.data(), 2);
  in.prefetch({0, 1, 0}, idx.data() + 2, 2);
  const int slot = in.get({1, 0, 0}, idx.data(), 2);  // another epoch: the prefetch is dropped
  ASSERT_EQ(log.threads.size(), 3u);
  EXPECT_EQ(log.threads[2], std::this_thread::get_id());
  EXPECT_EQ(in.images(slot)[0], 101.0f);
  EXPECT_THROW(in.get({1, 1, 0}, idx.data(), 3), std::exception);  // past the slots' size
  in.prefetch({1, 1, 0}, idx.data(), 2);
  EXPECT_THROW(in.prefetch({1, 2, 0}, idx.data(), 2), std::exception);  // one outstanding already
}

// take(): the layout's slices, in order through an epoch, each prefetched by the take before it
// (the first of the epoch excepted), none past the epoch's end.
TEST(DetectionInput, TakeWalksAnEpochsMicroBatchesPrefetchingEachNext) {
  DetectionInput in;
  FillLog log;
  const MicroBatchLayout layout{1, 2, 2, 8, 3};  // rank 1 of 2, 2 micro-batches of 2, 3 batches
  in.start(fake_fill(in, log), 2, 4, Device::cpu, layout);
  std::vector<int64_t> perm(24);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(50 + i);
  for (int64_t b = 0; b < 3; ++b)
    for (int m = 0; m < 2; ++m) {
      const TrainSlot t = in.take(1, b, m, perm.data());
      const Slice want = micro_batch_slice(layout, b, m);
      EXPECT_EQ(t.slice.begin, want.begin);
      EXPECT_EQ(t.slice.count, 2);
      EXPECT_EQ(in.images(t.slot)[0], float(100 + perm[size_t(want.begin)])) << b << " " << m;
      EXPECT_EQ(in.images(t.slot)[4], float(100 + perm[size_t(want.begin) + 1])) << b << " " << m;
    }
  // 6 micro-batches, 6 fills: the first on this thread, the other 5 prefetched, none after the last.
  ASSERT_EQ(log.threads.size(), 6u);
  EXPECT_EQ(log.threads[0], std::this_thread::get_id());
  for (size_t i = 1; i < 6; ++i) EXPECT_NE(log.threads[i], std::this_thread::get_id()) << i;
}
