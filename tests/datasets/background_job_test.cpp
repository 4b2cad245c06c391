// The background worker of the input pipelines (datasets/background_job.h): a job runs on another
// thread, wait() returns after it, its exception comes back to the caller, misuse throws, and a
// job still running when the worker goes is finished first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/fpu.h"
#include "datasets/background_job.h"

using namespace mlpd;

TEST(BackgroundJob, RunsEachJobOnItsOwnThreadWithDenormalsFlushed) {
  BackgroundJob job;
  for (int k = 0; k < 3; ++k) {
    std::thread::id ran_on;
    bool flushed = false;
    int value = 0;
    job.submit([&] {
      ran_on = std::this_thread::get_id();
      flushed = denormals_flushed();
      value = 10 + k;
    });
    EXPECT_TRUE(job.pending());
    job.wait();
    EXPECT_FALSE(job.pending());
    EXPECT_EQ(value, 10 + k);
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_TRUE(flushed);
  }
}

TEST(BackgroundJob, RethrowsAJobsErrorAndStaysUsable) {
  BackgroundJob job;
  EXPECT_THROW(job.wait(), std::exception);  // nothing submitted
  job.submit([] { throw std::runtime_error("fill failed"); });
  EXPECT_THROW(job.submit([] {}), std::exception);  // one outstanding already
  try {
    job.wait();
    ADD_FAILURE() << "the job's error was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "fill failed");
  }
  int value = 0;
  job.submit([&] { value = 7; });
  job.wait();
  EXPECT_EQ(value, 7);
}

TEST(BackgroundJob, StopFinishesARunningJobFirst) {
  std::atomic<bool> finished{false};
  {
    BackgroundJob job;
    job.submit([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      finished = true;
    });
  }  // the destructor stops it
  EXPECT_TRUE(finished);
}
