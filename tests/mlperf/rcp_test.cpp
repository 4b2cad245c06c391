#include "mlperf/rcp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "workloads/registry.h"

namespace mlpd {
namespace {

// Expected values from scipy 1.17 (scipy.stats.t.cdf, scipy.special.betainc,
// scipy.stats.ttest_ind(..., equal_var=False, alternative='less')).

TEST(Rcp, incomplete_beta_matches_scipy) {
  EXPECT_NEAR(incomplete_beta(2, 3, 0.4), 0.5248, 1e-12);
  EXPECT_NEAR(incomplete_beta(0.5, 0.5, 0.9), 0.7951672353008665, 1e-12);
  EXPECT_NEAR(incomplete_beta(10, 0.5, 0.99), 0.6579281751567845, 1e-12);  // the symmetric branch
  EXPECT_EQ(incomplete_beta(2, 3, 0.0), 0.0);
  EXPECT_EQ(incomplete_beta(2, 3, 1.0), 1.0);
}

TEST(Rcp, student_t_cdf_matches_tables) {
  // The one-sided 5% critical values of a t table.
  EXPECT_NEAR(student_t_cdf(-2.015, 5), 0.05000308616340318, 1e-10);
  EXPECT_NEAR(student_t_cdf(-1.812, 10), 0.05003763103292357, 1e-10);
  EXPECT_NEAR(student_t_cdf(2.015, 5), 1.0 - 0.05000308616340318, 1e-10);
  EXPECT_DOUBLE_EQ(student_t_cdf(0.0, 7), 0.5);
  // Non-integer degrees of freedom (Welch) and a far tail.
  EXPECT_NEAR(student_t_cdf(1.5, 3.7), 0.8932009153989933, 1e-10);
  EXPECT_NEAR(student_t_cdf(-0.3, 2.5), 0.39367118574759863, 1e-10);
  EXPECT_NEAR(student_t_cdf(-40, 1), 0.007956089912025812, 1e-12);
  EXPECT_EQ(student_t_cdf(-std::numeric_limits<double>::infinity(), 3), 0.0);
  EXPECT_EQ(student_t_cdf(std::numeric_limits<double>::infinity(), 3), 1.0);
}

const std::vector<RcpPoint> kTwoPoints = {
    {100, {4, 4, 5, 5}, "a"},        // mean 4.5, sd 0.57735
    {200, {6, 6, 6, 7, 7, 8}, "b"},  // mean 6.6667, sd 0.81650
};

TEST(Rcp, reference_at_a_point_is_that_point) {
  RcpLookup l = rcp_reference(kTwoPoints, 200);
  ASSERT_TRUE(l.ref) << l.why;
  EXPECT_FALSE(l.ref->interpolated);
  EXPECT_DOUBLE_EQ(l.ref->mean, 40.0 / 6.0);
  EXPECT_NEAR(l.ref->sd, 0.816496580927726, 1e-12);
  EXPECT_EQ(l.ref->n, 6);
  EXPECT_EQ(l.ref->source, "b");
}

TEST(Rcp, reference_between_points_interpolates_mean_and_sd) {
  RcpLookup l = rcp_reference(kTwoPoints, 125);
  ASSERT_TRUE(l.ref) << l.why;
  EXPECT_TRUE(l.ref->interpolated);
  EXPECT_NEAR(l.ref->mean, 5.041666666666667, 1e-12);
  EXPECT_NEAR(l.ref->sd, 0.6371368471241508, 1e-12);
  EXPECT_EQ(l.ref->n, 4);  // the smaller point
}

TEST(Rcp, reference_outside_the_points_or_without_points_is_refused) {
  for (int64_t b : {99, 201}) {
    RcpLookup l = rcp_reference(kTwoPoints, b);
    EXPECT_FALSE(l.ref) << b;
    EXPECT_NE(l.why.find("outside the RCPs (100..200)"), std::string::npos) << l.why;
  }
  RcpLookup none = rcp_reference({}, 128);
  EXPECT_FALSE(none.ref);
  EXPECT_NE(none.why.find("no RCP data"), std::string::npos) << none.why;
}

std::vector<std::optional<double>> runs(std::initializer_list<double> e) { return {e.begin(), e.end()}; }

const std::vector<RcpPoint> kResnetMiniLike = {{128, {4, 4, 4, 4, 4, 4, 4, 4, 5, 5}, "README"}};

TEST(Rcp, a_sample_like_the_reference_passes) {
  RcpResult r = rcp_test(kResnetMiniLike, 128, runs({4, 4, 5, 4, 5, 4, 4, 4, 4, 4}));
  EXPECT_EQ(r.verdict, RcpVerdict::Pass) << r.why;
  EXPECT_EQ(r.submission_n, 8);
  EXPECT_DOUBLE_EQ(r.submission_mean, 4.125);
  EXPECT_DOUBLE_EQ(r.reference_mean, 4.2);
  EXPECT_GT(r.p, kRcpAlpha);
}

TEST(Rcp, welch_statistic_matches_scipy_at_a_point) {
  // Olympic set {3, 3, 4} (2 and 6 dropped): p = 0.0525 just above alpha, so it passes.
  RcpResult r = rcp_test(kResnetMiniLike, 128, runs({6, 3, 2, 4, 3}));
  EXPECT_NEAR(r.t, -2.414039396301674, 1e-9);
  EXPECT_NEAR(r.p, 0.05253575505499264, 1e-9);
  EXPECT_EQ(r.verdict, RcpVerdict::Pass) << r.why;
}

TEST(Rcp, welch_statistic_matches_scipy_when_interpolated) {
  // {3.5, 4, 4.5}: mean 4, sd 0.5, against mean 5.0417, sd 0.6371, n 4 (scipy: p 0.0302).
  RcpResult r = rcp_test(kTwoPoints, 125, runs({9, 3.5, 4, 3, 4.5}));
  EXPECT_NEAR(r.t, -2.4230102687789565, 1e-9);
  EXPECT_NEAR(r.p, 0.03021706841638389, 1e-9);
  EXPECT_EQ(r.verdict, RcpVerdict::Fail) << r.why;
}

TEST(Rcp, a_clearly_faster_sample_fails) {
  RcpResult r = rcp_test(kResnetMiniLike, 128, runs({3, 3, 2, 3, 4}));
  EXPECT_EQ(r.verdict, RcpVerdict::Fail) << r.why;
  EXPECT_LT(r.p, 1e-4);
  EXPECT_DOUBLE_EQ(r.submission_mean, 3.0);
  EXPECT_NE(r.why.find("faster"), std::string::npos) << r.why;
}

TEST(Rcp, a_slower_sample_passes) {
  RcpResult r = rcp_test(kResnetMiniLike, 128, runs({6, 6, 5, 7, 6}));
  EXPECT_EQ(r.verdict, RcpVerdict::Pass) << r.why;
  EXPECT_GT(r.p, 0.99);
}

TEST(Rcp, no_spread_on_either_side_fails_only_when_faster) {
  const std::vector<RcpPoint> flat = {{64, {5, 5, 5}, "flat"}};
  EXPECT_EQ(rcp_test(flat, 64, runs({5, 5, 5, 5, 5})).verdict, RcpVerdict::Pass);
  EXPECT_EQ(rcp_test(flat, 64, runs({6, 6, 6, 6, 6})).verdict, RcpVerdict::Pass);
  RcpResult faster = rcp_test(flat, 64, runs({4, 4, 4, 4, 4}));
  EXPECT_EQ(faster.verdict, RcpVerdict::Fail) << faster.why;
  EXPECT_EQ(faster.p, 0.0);
}

TEST(Rcp, one_run_that_did_not_converge_is_dropped_as_the_slowest) {
  // Sorted last and dropped: the olympic set is {4, 4, 5}.
  std::vector<std::optional<double>> e = {4.0, 5.0, std::nullopt, 4.0, 4.0};
  RcpResult with_failed = rcp_test(kResnetMiniLike, 128, e);
  EXPECT_EQ(with_failed.verdict, RcpVerdict::Pass) << with_failed.why;
  EXPECT_EQ(with_failed.submission_n, 3);
  EXPECT_NEAR(with_failed.submission_mean, 13.0 / 3.0, 1e-12);
  std::vector<std::optional<double>> two_failed = {4.0, std::nullopt, std::nullopt, 4.0, 4.0};
  RcpResult bad = rcp_test(kResnetMiniLike, 128, two_failed);
  EXPECT_EQ(bad.verdict, RcpVerdict::NotApplicable);
  EXPECT_NE(bad.why.find("2 runs did not converge"), std::string::npos) << bad.why;
}

TEST(Rcp, not_applicable_without_rcp_data_or_outside_it) {
  RcpResult none = rcp_test({}, 128, runs({1, 1, 1, 1, 1}));
  EXPECT_EQ(none.verdict, RcpVerdict::NotApplicable);
  EXPECT_NE(none.why.find("no RCP data"), std::string::npos) << none.why;
  RcpResult outside = rcp_test(kResnetMiniLike, 256, runs({1, 1, 1, 1, 1}));
  EXPECT_EQ(outside.verdict, RcpVerdict::NotApplicable);
  EXPECT_STREQ(rcp_verdict_name(outside.verdict), "n/a");
}

// The registered data: each point ascending, with runs and a source; the mini points pass the
// calibration runs they were made from.
TEST(Rcp, registered_rcps_are_ascending_and_cited) {
  for (const std::string& name : workload_names()) {
    const BenchmarkSpec& spec = find_workload(name).spec;
    for (const ScaleSpec& s : spec.scales) {
      for (size_t i = 0; i < s.rcps.size(); ++i) {
        EXPECT_GE(s.rcps[i].epochs.size(), 2u) << name << " " << s.name;
        EXPECT_FALSE(s.rcps[i].source.empty()) << name << " " << s.name;
        if (i > 0) {
          EXPECT_LT(s.rcps[i - 1].global_batch, s.rcps[i].global_batch) << name << " " << s.name;
        }
      }
      // Every mini scale has calibrated RCPs (ncf three points, the others one).
      if (s.name == "mini") {
        EXPECT_GE(s.rcps.size(), 1u) << name;
      }
      if (s.name == "mini" && name == "resnet") {
        EXPECT_EQ(s.rcps.size(), 1u) << name;
      }
      if (s.name == "mini" && name == "ncf") {
        EXPECT_EQ(s.rcps.size(), 3u) << name;
      }
      if (s.name == "mini" && name == "transformer") {
        EXPECT_EQ(s.rcps.size(), 1u) << name;
        EXPECT_EQ(s.rcps[0].epochs.size(), 10u) << name;
      }
      // Each mini point's own runs pass the RCP test at that point.
      if (s.name == "mini") {
        for (const RcpPoint& p : s.rcps) {
          std::vector<std::optional<double>> own(p.epochs.begin(), p.epochs.end());
          RcpResult r = rcp_test(s.rcps, p.global_batch, own);
          EXPECT_EQ(r.verdict, RcpVerdict::Pass) << name << " at " << p.global_batch << ": " << r.why;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlpd
