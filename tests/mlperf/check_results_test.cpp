#include "mlperf/check_results.h"

#include <gtest/gtest.h>

#include "log_fixture.h"
#include "mlperf/keys.h"
#include "workloads/registry.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;
using namespace mlpd::keys;

LogSpec mini_run(int epochs) { return mini_resnet_spec(epochs); }

// One run per spec under <dir>/testsys/resnet/, seeds 1, 2, ... unless `seeds` says otherwise.
std::vector<std::string> write_set(const std::string& dir, const std::vector<LogSpec>& specs,
                                   std::vector<uint64_t> seeds = {}) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t seed = i < seeds.size() ? seeds[i] : i + 1;
    paths.push_back(write_log(dir, specs[i]));
    edit_log(paths.back(), [&](json& j) {
      if (j["key"] == kSeed) j["value"] = seed;
    });
  }
  return paths;
}

// Moves run_stop (and what follows it) to `seconds` after run_start: a run's time to train.
void set_run_seconds(const std::string& path, double seconds) {
  double start = 0.0;
  edit_log(path, [&](json& j) {
    if (j["key"] == kRunStart) start = j["time_ms"].get<double>();
    if (j["key"] == kRunStop) j["time_ms"] = start + seconds * 1000.0;
  });
}

ResultSetCheck check_one_set(const std::string& dir) {
  std::vector<BenchmarkResults> sets = read_results(dir, &find_benchmark_spec);
  EXPECT_EQ(sets.size(), 1u);
  return check_result_set(sets.at(0), &find_benchmark_spec);
}

std::string all(const ResultSetCheck& c) {
  std::string s = c.summary + "\n";
  for (const auto& e : c.errors) s += "  error: " + e.where + ": " + e.message + "\n";
  for (const auto& n : c.notes) s += "  note: " + n.where + ": " + n.message + "\n";
  return s;
}

bool has_error(const ResultSetCheck& c, const std::string& part) {
  for (const auto& e : c.errors)
    if (e.message.find(part) != std::string::npos) return true;
  return false;
}

TEST(CheckResults, a_good_set_passes_with_its_score_and_rcp) {
  const std::string dir = scratch_dir();
  auto paths = write_set(dir, {mini_run(4), mini_run(5), mini_run(4), mini_run(4), mini_run(5)});
  for (size_t i = 0; i < paths.size(); ++i) set_run_seconds(paths[i], 60.0 * static_cast<double>(i + 1));
  ResultSetCheck c = check_one_set(dir);
  EXPECT_TRUE(c.ok) << all(c);
  EXPECT_TRUE(c.errors.empty()) << all(c);
  EXPECT_EQ(c.scale, "mini");
  EXPECT_EQ(c.division, "closed");
  EXPECT_EQ(c.required_runs, 5);
  ASSERT_TRUE(c.score.valid) << c.score.why;
  EXPECT_DOUBLE_EQ(c.score.mean_s, 180.0);  // 60 and 300 s dropped
  EXPECT_EQ(c.rcp.verdict, RcpVerdict::Pass) << c.rcp.why;
  EXPECT_NEAR(c.rcp.submission_mean, 13.0 / 3.0, 1e-12);  // {4, 4, 5} after the olympic drop
  EXPECT_DOUBLE_EQ(c.rcp.reference_mean, 4.2);
  EXPECT_NE(c.summary.find("score 3.00 min"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("RCP pass"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("PASSED"), std::string::npos) << c.summary;
}

TEST(CheckResults, too_few_runs_fail) {
  const std::string dir = scratch_dir();
  write_set(dir, {mini_run(4), mini_run(5), mini_run(4)});
  ResultSetCheck c = check_one_set(dir);
  EXPECT_FALSE(c.ok);
  EXPECT_FALSE(c.score.valid);
  EXPECT_TRUE(has_error(c, "3 run(s), 5 required")) << all(c);
  EXPECT_NE(c.summary.find("FAILED"), std::string::npos) << c.summary;
}

TEST(CheckResults, two_runs_that_did_not_converge_fail) {
  const std::string dir = scratch_dir();
  LogSpec aborted = mini_run(4);
  aborted.final_accuracy = 0.85;
  aborted.status = kAborted;
  write_set(dir, {mini_run(4), aborted, mini_run(4), aborted, mini_run(5)});
  ResultSetCheck c = check_one_set(dir);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(has_error(c, "2 runs did not converge")) << all(c);
}

TEST(CheckResults, a_run_that_did_not_converge_counts_as_the_slowest_even_when_quickest) {
  const std::string dir = scratch_dir();
  LogSpec aborted = mini_run(4);
  aborted.final_accuracy = 0.85;
  aborted.status = kAborted;
  auto paths = write_set(dir, {mini_run(4), mini_run(5), aborted, mini_run(4), mini_run(4)});
  const double seconds[] = {100, 200, 10, 300, 400};  // the aborted run stopped first
  for (size_t i = 0; i < paths.size(); ++i) set_run_seconds(paths[i], seconds[i]);
  ResultSetCheck c = check_one_set(dir);
  EXPECT_TRUE(c.ok) << all(c);
  ASSERT_TRUE(c.score.valid) << c.score.why;
  EXPECT_EQ(c.score.dropped_slowest, 2);
  EXPECT_EQ(c.score.dropped_fastest, 0);     // the quickest converged run, not the aborted one
  EXPECT_DOUBLE_EQ(c.score.mean_s, 300.0);   // 200, 300, 400
  ASSERT_GE(c.notes.size(), 1u) << all(c);
  EXPECT_EQ(c.notes[0].where, paths[2]);
  EXPECT_NE(c.notes[0].message.find("did not converge"), std::string::npos);
}

TEST(CheckResults, two_runs_with_one_seed_fail_as_a_copy) {
  const std::string dir = scratch_dir();
  auto paths = write_set(dir, {mini_run(4), mini_run(5), mini_run(4), mini_run(4), mini_run(5)}, {7, 8, 9, 8, 10});
  ResultSetCheck c = check_one_set(dir);
  EXPECT_FALSE(c.ok);
  ASSERT_EQ(c.errors.size(), 1u) << all(c);
  EXPECT_EQ(c.errors[0].where, paths[3]);
  EXPECT_TRUE(has_error(c, "seed 8 is also the seed of result_1.txt")) << all(c);
}

TEST(CheckResults, a_set_faster_than_the_rcp_fails) {
  const std::string dir = scratch_dir();
  write_set(dir, {mini_run(3), mini_run(3), mini_run(3), mini_run(3), mini_run(4)});
  ResultSetCheck c = check_one_set(dir);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(c.score.valid) << c.score.why;  // a valid score, but not comparable
  EXPECT_EQ(c.rcp.verdict, RcpVerdict::Fail) << c.rcp.why;
  EXPECT_TRUE(has_error(c, "RCP: submission mean 3 epochs")) << all(c);
  EXPECT_TRUE(has_error(c, "vs reference 4.2")) << all(c);
  EXPECT_TRUE(has_error(c, "p 4.27e-06 < 0.05")) << all(c);  // t = -1.2 / (0.42 / sqrt(10)) = -9, dof 9
  EXPECT_TRUE(has_error(c, "README.md")) << all(c);  // names where the reference comes from
  EXPECT_NE(c.summary.find("RCP fail"), std::string::npos) << c.summary;
}

TEST(CheckResults, the_open_division_and_a_batch_without_rcps_are_not_applicable) {
  const std::string dir = scratch_dir();
  std::vector<LogSpec> runs(5, mini_run(3));
  for (LogSpec& s : runs) s.division = kOpen;
  write_set(dir, runs);
  ResultSetCheck c = check_one_set(dir);
  EXPECT_TRUE(c.ok) << all(c);
  EXPECT_EQ(c.rcp.verdict, RcpVerdict::NotApplicable);
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.back().message.find("RCP test not applicable: division open"), std::string::npos) << all(c);
}

TEST(CheckResults, a_set_mixing_scales_or_batches_fails) {
  const std::string dir = scratch_dir();
  LogSpec other = mini_run(4);
  other.global_batch_size = 256;
  write_set(dir, {mini_run(4), mini_run(5), mini_run(4), other, LogSpec{}});
  ResultSetCheck c = check_one_set(dir);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(has_error(c, "different scales (mini, reference)")) << all(c);
  EXPECT_TRUE(has_error(c, "different global batch sizes (128, 256, 3072)")) << all(c);
}

}  // namespace
}  // namespace mlpd
