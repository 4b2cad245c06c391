#include "scaling/convergence.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "mlperf/rcp.h"
#include "workloads/registry.h"

namespace mlpd::scaling {
namespace {

const std::vector<RcpPoint>& resnet_reference_rcps() {
  return find_scale(find_workload("resnet").spec, "reference").rcps;
}

TEST(Convergence, inside_the_rcps_epochs_are_rcp_reference_interpolation) {
  const ConvergenceModel m = make_convergence(resnet_reference_rcps());
  for (int64_t b : {1632, 2500, 3264, 10000, 20000, 40000, 65536}) {
    const EpochsEstimate e = epochs_at(m, b);
    const RcpLookup ref = rcp_reference(resnet_reference_rcps(), b);
    ASSERT_TRUE(ref.ref.has_value()) << b;
    EXPECT_DOUBLE_EQ(e.epochs, ref.ref->mean) << b;
    EXPECT_EQ(e.kind, ref.ref->interpolated ? EpochsKind::interpolated : EpochsKind::at_point);
  }
  // Below the table: extrapolated by the fit, and flagged.
  const EpochsEstimate lo = epochs_at(m, 1024);
  EXPECT_EQ(lo.kind, EpochsKind::extrapolated);
  EXPECT_DOUBLE_EQ(lo.epochs, m.fit.epochs(1024));
  EXPECT_NE(lo.note.find("McCandlish"), std::string::npos);
}

TEST(Convergence, mccandlish_fit_recovers_e_min_and_b_crit) {
  std::vector<RcpPoint> pts;
  for (int64_t b = 1000; b <= 64000; b *= 2) {
    const double e = 30.0 * (1.0 + b / 20000.0);
    pts.push_back({b, {e - 1, e, e + 1}, "synthetic"});  // mean e
  }
  const McCandlishFit f = fit_mccandlish(pts);
  ASSERT_TRUE(f.valid);
  EXPECT_NEAR(f.e_min, 30.0, 1e-9);
  EXPECT_NEAR(f.b_crit, 20000.0, 1e-6);
  EXPECT_LT(f.rms, 1e-9);
  const ConvergenceModel m = make_convergence(pts);
  const EpochsEstimate far = epochs_at(m, 256000);
  EXPECT_EQ(far.kind, EpochsKind::extrapolated);
  EXPECT_NEAR(far.epochs, 30.0 * (1 + 256000 / 20000.0), 1e-6);
  EXPECT_TRUE(m.past_critical(25000));
  EXPECT_FALSE(m.past_critical(15000));
}

TEST(Convergence, resnet_reference_fit_has_epochs_growing_with_batch) {
  const ConvergenceModel m = make_convergence(resnet_reference_rcps());
  ASSERT_TRUE(m.fit.valid);
  EXPECT_GT(m.fit.e_min, 30.0);  // the smallest RCPs converge in ~35 epochs
  EXPECT_LT(m.fit.e_min, 40.0);
  EXPECT_GT(m.fit.b_crit, 20000.0);
  EXPECT_LT(m.fit.b_crit, 200000.0);
}

TEST(Convergence, one_point_holds_epochs_constant_and_says_so) {
  const std::vector<RcpPoint> one = {{128, {4, 4, 5, 5}, "calibration"}};
  const ConvergenceModel m = make_convergence(one);
  EXPECT_NE(m.summary.find("one convergence point"), std::string::npos);
  EXPECT_FALSE(m.past_critical(1 << 20));
  const EpochsEstimate at = epochs_at(m, 128);
  EXPECT_EQ(at.kind, EpochsKind::at_point);
  EXPECT_DOUBLE_EQ(at.epochs, 4.5);
  const EpochsEstimate other = epochs_at(m, 4096);
  EXPECT_EQ(other.kind, EpochsKind::constant);
  EXPECT_DOUBLE_EQ(other.epochs, 4.5);
  EXPECT_NE(other.note.find("independent of batch"), std::string::npos);
  // The mini scales carry exactly one point: the same path.
  const ConvergenceModel mini = make_convergence(find_scale(find_workload("resnet").spec, "mini").rcps);
  EXPECT_EQ(epochs_at(mini, 1024).kind, EpochsKind::constant);
}

TEST(Convergence, no_points_is_a_usage_error) {
  EXPECT_THROW(make_convergence({}), UserError);
  try {
    make_convergence({});
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
  }
}

}  // namespace
}  // namespace mlpd::scaling
