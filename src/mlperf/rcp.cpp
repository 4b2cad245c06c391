#include "mlperf/rcp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlpd {

namespace {

// The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified Lentz), converging
// fast for x < (a + 1) / (a + b + 2); the caller uses the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
// beyond that.
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIter = 500;
  constexpr double kEps = 1e-15;
  constexpr double kTiny = 1e-300;  // keeps a zero denominator from stopping Lentz's method
  const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIter; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));  // even step
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));  // odd step
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kEps) break;
  }
  return h;
}

struct Sample {
  double mean = 0.0;
  double sd = 0.0;  // n - 1; 0 for a single value
  int n = 0;
};

Sample sample_of(const std::vector<double>& v) {
  Sample s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  double sum = 0.0;
  for (double x : v) sum += x;
  s.mean = sum / s.n;
  if (s.n < 2) return s;
  double ss = 0.0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / (s.n - 1));
  return s;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (!(x > 0.0)) return 0.0;
  if (!(x < 1.0)) return 1.0;
  // x^a (1-x)^b / (a B(a,b)) in logs: the factor in front of the continued fraction.
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

double student_t_cdf(double t, double dof) {
  if (std::isnan(t) || !(dof > 0.0)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  // P(|T| > |t|) = I_{dof/(dof+t^2)}(dof/2, 1/2); each tail is half of it.
  const double tail = 0.5 * incomplete_beta(0.5 * dof, 0.5, dof / (dof + t * t));
  return t < 0 ? tail : 1.0 - tail;
}

RcpLookup rcp_reference(const std::vector<RcpPoint>& rcps, int64_t global_batch) {
  RcpLookup out;
  if (rcps.empty()) {
    out.why = "no RCP data for this scale";
    return out;
  }
  auto at_point = [&](const RcpPoint& p) {
    const Sample s = sample_of(p.epochs);
    RcpReference r;
    r.global_batch = p.global_batch;
    r.mean = s.mean;
    r.sd = s.sd;
    r.n = s.n;
    r.source = p.source;
    return r;
  };
  for (const RcpPoint& p : rcps)
    if (p.global_batch == global_batch) {
      out.ref = at_point(p);
      return out;
    }
  for (size_t i = 0; i + 1 < rcps.size(); ++i) {
    const RcpPoint &lo = rcps[i], &hi = rcps[i + 1];
    if (!(lo.global_batch < global_batch && global_batch < hi.global_batch)) continue;
    const RcpReference a = at_point(lo), b = at_point(hi);
    const double w = static_cast<double>(global_batch - lo.global_batch) /
                     static_cast<double>(hi.global_batch - lo.global_batch);
    RcpReference r;
    r.global_batch = global_batch;
    r.mean = a.mean + w * (b.mean - a.mean);
    r.sd = a.sd + w * (b.sd - a.sd);
    // An interpolated point was never run: it is no better known than the smaller of its two.
    r.n = std::min(a.n, b.n);
    r.interpolated = true;
    r.source = lo.source == hi.source ? lo.source : lo.source + "; " + hi.source;
    out.ref = r;
    return out;
  }
  out.why = "global batch " + std::to_string(global_batch) + " is outside the RCPs (" +
            std::to_string(rcps.front().global_batch) + ".." + std::to_string(rcps.back().global_batch) + ")";
  return out;
}

const char* rcp_verdict_name(RcpVerdict v) {
  switch (v) {
    case RcpVerdict::Pass: return "pass";
    case RcpVerdict::Fail: return "fail";
    case RcpVerdict::NotApplicable: break;
  }
  return "n/a";
}

RcpResult rcp_test(const std::vector<RcpPoint>& rcps, int64_t global_batch,
                   const std::vector<std::optional<double>>& epochs) {
  RcpResult r;
  const RcpLookup look = rcp_reference(rcps, global_batch);
  if (!look.ref) {
    r.why = look.why;
    return r;
  }
  const RcpReference& ref = *look.ref;
  r.reference_mean = ref.mean;
  r.reference_sd = ref.sd;
  r.reference_n = ref.n;
  r.source = ref.source;

  // The olympic set: a run that did not converge sorts last (infinitely many epochs).
  std::vector<std::optional<double>> sorted = epochs;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.has_value() != b.has_value()) return a.has_value();
    return a.has_value() && *a < *b;
  });
  if (sorted.size() >= 3) sorted = std::vector<std::optional<double>>(sorted.begin() + 1, sorted.end() - 1);
  std::vector<double> kept;
  for (const auto& e : sorted)
    if (e) kept.push_back(*e);
  if (kept.size() < sorted.size()) {
    const auto failed = std::count(epochs.begin(), epochs.end(), std::nullopt);
    r.why = std::to_string(failed) + " runs did not converge (at most one may)";
    return r;
  }
  const Sample sub = sample_of(kept);
  r.submission_mean = sub.mean;
  r.submission_sd = sub.sd;
  r.submission_n = sub.n;
  if (sub.n < 2 || ref.n < 2) {
    r.why = sub.n < 2 ? std::to_string(epochs.size()) + " run(s): too few to test"
                      : "the reference has " + std::to_string(ref.n) + " run(s): too few to test";
    return r;
  }

  const double v_sub = sub.sd * sub.sd / sub.n, v_ref = ref.sd * ref.sd / ref.n;
  const double se = std::sqrt(v_sub + v_ref);
  if (se == 0.0) {
    // No spread on either side: any difference is "significant", none is not.
    r.dof = sub.n + ref.n - 2;
    const double inf = std::numeric_limits<double>::infinity();
    r.t = sub.mean < ref.mean ? -inf : (sub.mean > ref.mean ? inf : 0.0);
    r.p = sub.mean < ref.mean ? 0.0 : (sub.mean > ref.mean ? 1.0 : 0.5);
  } else {
    r.t = (sub.mean - ref.mean) / se;
    r.dof = (v_sub + v_ref) * (v_sub + v_ref) /
            (v_sub * v_sub / (sub.n - 1) + v_ref * v_ref / (ref.n - 1));
    r.p = student_t_cdf(r.t, r.dof);
  }
  r.verdict = r.p < kRcpAlpha ? RcpVerdict::Fail : RcpVerdict::Pass;
  const bool fail = r.verdict == RcpVerdict::Fail;
  r.why = fmt::format("submission mean {:.3g} epochs ({} runs) vs reference {:.3g} (sd {:.2g}, {} runs{}) at global "
                      "batch {}: p {:.3g} {} {:.2g}{}",
                      sub.mean, sub.n, ref.mean, ref.sd, ref.n, ref.interpolated ? ", interpolated" : "", global_batch,
                      r.p, fail ? "<" : ">=", kRcpAlpha,
                      fail ? ", converges significantly faster than the reference" : "");
  return r;
}

}  // namespace mlpd
