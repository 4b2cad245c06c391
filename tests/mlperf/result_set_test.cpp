#include <gtest/gtest.h>

#include "core/check.h"
#include "log_fixture.h"
#include "mlperf/result_set.h"
#include "workloads/registry.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;

RunRecord run_of(double seconds, bool converged) {
  RunRecord r;
  r.check.ok = true;
  r.check.converged = converged;
  r.check.run_seconds = seconds;
  return r;
}

TEST(OlympicScore, DropsFastestAndSlowestAndAveragesTheRest) {
  std::vector<RunRecord> runs = {run_of(50, true), run_of(10, true), run_of(30, true), run_of(90, true),
                                 run_of(40, true)};
  OlympicScore s = olympic_score(runs, 5);
  ASSERT_TRUE(s.valid) << s.why;
  EXPECT_EQ(s.dropped_fastest, 1);
  EXPECT_EQ(s.dropped_slowest, 3);
  EXPECT_DOUBLE_EQ(s.mean_s, 40.0);  // (50 + 30 + 40) / 3
  EXPECT_EQ(s.converged, 5);
}

TEST(OlympicScore, OneRunMissingTheTargetIsTheDroppedSlowestWhateverItsTime) {
  // The non-converged run stopped early (max epochs at 20 s): it is still the slowest.
  std::vector<RunRecord> runs = {run_of(50, true), run_of(20, false), run_of(30, true), run_of(90, true),
                                 run_of(40, true)};
  OlympicScore s = olympic_score(runs, 5);
  ASSERT_TRUE(s.valid) << s.why;
  EXPECT_EQ(s.dropped_slowest, 1);
  EXPECT_EQ(s.dropped_fastest, 2);
  EXPECT_DOUBLE_EQ(s.mean_s, (50.0 + 90.0 + 40.0) / 3);
  EXPECT_EQ(s.converged, 4);
}

TEST(OlympicScore, TwoRunsMissingTheTargetHaveNoScore) {
  std::vector<RunRecord> runs = {run_of(50, false), run_of(20, false), run_of(30, true), run_of(90, true),
                                 run_of(40, true)};
  OlympicScore s = olympic_score(runs, 5);
  EXPECT_FALSE(s.valid);
  EXPECT_NE(s.why.find("2 runs did not converge"), std::string::npos) << s.why;
}

TEST(OlympicScore, FewerRunsThanRequiredHaveNoScore) {
  std::vector<RunRecord> runs = {run_of(50, true), run_of(20, true), run_of(30, true)};
  OlympicScore s = olympic_score(runs, 5);
  EXPECT_FALSE(s.valid);
  EXPECT_EQ(s.why, "3 run(s), 5 required");
  EXPECT_TRUE(olympic_score(runs, 0).valid);  // any number >= 3
  EXPECT_FALSE(olympic_score({run_of(1, true), run_of(2, true)}, 0).valid);
}

TEST(OlympicScore, EqualTimesDropTwoDifferentRuns) {
  std::vector<RunRecord> runs = {run_of(30, true), run_of(30, true), run_of(30, true)};
  OlympicScore s = olympic_score(runs, 3);
  ASSERT_TRUE(s.valid);
  EXPECT_NE(s.dropped_fastest, s.dropped_slowest);
  EXPECT_DOUBLE_EQ(s.mean_s, 30.0);
}

TEST(ReadResults, FindsBenchmarkFoldersAtEveryLevelAndReadsEachRun) {
  const std::string root = scratch_dir();
  LogSpec s;
  s.epochs = 4;
  s.final_accuracy = 0.8;  // the fixture's curve reaches 0.759 only at the last epoch
  write_log(root, s);
  write_log(root, s);
  for (const std::string& dir : {root, root + "/testsys", root + "/testsys/resnet"}) {
    std::vector<BenchmarkResults> sets = read_results(dir, &find_benchmark_spec);
    ASSERT_EQ(sets.size(), 1u) << dir;
    EXPECT_EQ(sets[0].system, "testsys") << dir;
    EXPECT_EQ(sets[0].benchmark, "resnet");
    ASSERT_EQ(sets[0].runs.size(), 2u);
    const RunRecord& r = sets[0].runs[1];
    EXPECT_EQ(r.index, 1);
    EXPECT_TRUE(r.check.ok);
    EXPECT_EQ(r.seed, 42u);
    EXPECT_EQ(r.global_batch, 3072);
    ASSERT_EQ(r.evals.size(), 4u);
    EXPECT_DOUBLE_EQ(r.evals[3].epoch, 4.0);
    EXPECT_DOUBLE_EQ(r.target, 0.759);
    ASSERT_TRUE(r.epochs_to_target.has_value());
    EXPECT_DOUBLE_EQ(*r.epochs_to_target, 4.0);
  }
}

TEST(ReadResults, AFolderWithoutResultsIsAUsageError) {
  const std::string root = scratch_dir();
  fs::create_directories(root + "/sys/resnet");
  std::ofstream(root + "/sys/resnet/notes.txt") << "not a result";
  try {
    read_results(root, &find_benchmark_spec);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
  }
  EXPECT_THROW(read_results(root + "/missing", &find_benchmark_spec), UserError);
}

}  // namespace
}  // namespace mlpd
