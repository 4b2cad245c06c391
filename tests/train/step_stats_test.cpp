#include "train/step_stats.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mlpd {
namespace {

// Two ranks; rank 1 computes 2 ms longer each step, so rank 0 waits those 2 ms as skew and the
// rest of its wait is exposed communication.
TEST(StepStats, SkewIsTheSlowestRanksExtraComputeAndTheRestOfTheWaitIsComm) {
  std::vector<std::vector<StepTimes>> r(2);
  for (int s = 0; s < 4; ++s) {
    r[0].push_back({0.010, 0.005, 0.001, 0.004, 64, 1000});
    r[1].push_back({0.012, 0.003, 0.001, 0.004, 64, 3000});
  }
  const StepStatsSummary x = summarize_step_times(r, 2, 0);
  EXPECT_EQ(x.steps, 4);
  EXPECT_NEAR(x.compute_s, 0.011, 1e-12);
  EXPECT_NEAR(x.skew_s, 0.001, 1e-12);   // (2 ms + 0) / 2
  EXPECT_NEAR(x.comm_s, 0.003, 1e-12);   // (5 - 2 + 3) / 2
  EXPECT_NEAR(x.other_s, 0.001, 1e-12);
  EXPECT_NEAR(x.step_s, 0.016, 1e-12);   // each rank's step: 16 ms
  EXPECT_NEAR(x.global_batch, 64, 1e-12);
  EXPECT_NEAR(x.throughput, 64 / 0.016, 1e-6);
  EXPECT_NEAR(x.comm_busy_s, 0.004, 1e-12);
  EXPECT_NEAR(x.comm_bytes, 2000, 1e-9);
  EXPECT_NEAR(x.compute_cv, 0.0, 1e-12);
}

TEST(StepStats, SkewBeyondTheWaitIsNotCountedTwice) {
  // Rank 0 is 5 ms faster but waited only 1 ms for its buckets (the rest shows in the update).
  std::vector<std::vector<StepTimes>> r = {{{0.010, 0.001, 0.006, 0, 8}}, {{0.015, 0.001, 0.001, 0, 8}}};
  const StepStatsSummary x = summarize_step_times(r, 2, 0);
  EXPECT_NEAR(x.skew_s, 0.0005, 1e-12);
  EXPECT_NEAR(x.comm_s, 0.0005, 1e-12);
  EXPECT_NEAR(x.step_s, (0.017 + 0.017) / 2, 1e-12);
}

TEST(StepStats, WarmupStepsAreLeftOutAndCvMeasuresStepToStepVariation) {
  std::vector<std::vector<StepTimes>> r(1);
  r[0].push_back({1.0, 0, 0, 0, 10});  // warm-up: huge
  r[0].push_back({0.010, 0, 0, 0, 10});
  r[0].push_back({0.020, 0, 0, 0, 10});
  const StepStatsSummary x = summarize_step_times(r, 1, 1);
  EXPECT_EQ(x.skipped, 1);
  EXPECT_EQ(x.steps, 2);
  EXPECT_NEAR(x.compute_s, 0.015, 1e-12);
  EXPECT_NEAR(x.compute_cv, 0.00707106781 / 0.015, 1e-6);  // sd with n - 1
  const StepStatsSummary all = summarize_step_times(r, 1, 0);
  EXPECT_GT(all.compute_s, 0.3);
}

TEST(StepStats, WarmupRule) {
  EXPECT_EQ(warmup_steps_to_skip(3), 0);
  EXPECT_EQ(warmup_steps_to_skip(10), 2);
  EXPECT_EQ(warmup_steps_to_skip(100), 10);
  EXPECT_EQ(warmup_steps_to_skip(100000), 20);
}

TEST(StepStats, RanksWithDifferentStepCountsAreAnError) {
  std::vector<std::vector<StepTimes>> r = {{{1, 0, 0, 0, 1}}, {}};
  EXPECT_THROW(summarize_step_times(r, 2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace mlpd
