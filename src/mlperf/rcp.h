// MLPerf's reference convergence points (RCP) test: are a submission's epochs-to-target
// comparable with the reference's at the same global batch? A set whose mean is significantly
// BELOW the reference mean (one-sided, p < 0.05) converges suspiciously fast: its hyperparameters
// are not the ones the benchmark was calibrated with, so its time is not comparable.
//
// Our test is Welch's t-test (unequal variances), submission sample against reference sample.
// The official rcp_checker (mlperf_logging) instead uses a pooled-variance t-test on the olympic
// reference mean, and turns it into a "max speedup"; both ask the same question, Welch's does not
// assume the two spreads are equal (ours are 3-10 runs, often all the same epoch).
//
// Units: epochs (the eval's epoch_num when the target was first met). Batches: global.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"

namespace mlpd {

// Regularized incomplete beta I_x(a, b), a, b > 0, x in [0, 1] (Lentz's continued fraction, as
// in Numerical Recipes 6.4); the Student t CDF is built on it.
double incomplete_beta(double a, double b, double x);

// P(T <= t) for Student's t with `dof` > 0 degrees of freedom (need not be an integer: Welch).
// t = +-infinity gives 1 or 0.
double student_t_cdf(double t, double dof);

// The reference at one global batch: a point's sample mean and standard deviation (n - 1), or
// between two points both interpolated linearly in the batch, n then the smaller of the two.
struct RcpReference {
  int64_t global_batch = 0;
  double mean = 0.0;
  double sd = 0.0;
  int n = 0;
  bool interpolated = false;
  std::string source;  // the point's (or both points') source
};

struct RcpLookup {
  std::optional<RcpReference> ref;
  std::string why;  // when no ref: "no RCP data", "global batch 64 is outside the RCPs (128..4096)"
};

// `rcps` ascending in global batch (as ScaleSpec::rcps). No extrapolation: outside the covered
// batches the reference says nothing.
RcpLookup rcp_reference(const std::vector<RcpPoint>& rcps, int64_t global_batch);

enum class RcpVerdict { Pass, Fail, NotApplicable };
const char* rcp_verdict_name(RcpVerdict v);  // "pass", "fail", "n/a"

struct RcpResult {
  RcpVerdict verdict = RcpVerdict::NotApplicable;
  std::string why;         // not applicable: why; pass/fail: the comparison in one line
  double reference_mean = 0.0;
  double reference_sd = 0.0;
  int reference_n = 0;
  double submission_mean = 0.0;
  double submission_sd = 0.0;
  int submission_n = 0;    // runs in the olympic set that was tested
  double t = 0.0;          // (submission - reference) / standard error: negative = faster
  double dof = 0.0;        // Welch-Satterthwaite
  double p = 1.0;          // P(a submission this fast | same convergence as the reference)
  std::string source;
};

// The one-sided significance level (MLPerf's alpha).
inline constexpr double kRcpAlpha = 0.05;

// `epochs`: every run of the set, std::nullopt for a run that did not converge (counted as the
// slowest, like MLPerf's checker and the olympic score). With >= 3 runs the fewest and the most
// epochs are dropped; more than one non-converged run, or fewer than 2 runs left, is not
// applicable (the score already rejects such a set). Fails when p < kRcpAlpha. When both sides
// have no spread (all runs the same epoch) the t statistic is undefined: then it fails exactly
// when the submission mean is below the reference mean.
RcpResult rcp_test(const std::vector<RcpPoint>& rcps, int64_t global_batch,
                   const std::vector<std::optional<double>>& epochs);

}  // namespace mlpd
