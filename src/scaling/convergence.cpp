#include "scaling/least_squares.h"
#include "scaling/convergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/check.h"
#include "mlperf/rcp.h"

namespace mlpd::scaling {

namespace {

double mean_of(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / v.size();
}

}  // namespace

double McCandlishFit::epochs(double global_batch) const {
  if (!std::isfinite(b_crit)) return e_min;
  return e_min * (1.0 + global_batch / b_crit);
}

McCandlishFit fit_mccandlish(const std::vector<RcpPoint>& rcps) {
  McCandlishFit f;
  std::vector<std::pair<double, double>> xy;
  for (const RcpPoint& p : rcps)
    if (!p.epochs.empty()) xy.emplace_back(static_cast<double>(p.global_batch), mean_of(p.epochs));
  if (xy.size() < 2) return f;
  const LineFit line = fit_line(xy);
  if (!(line.sxx > 0)) return f;
  double b = line.slope;
  double a = line.intercept;
  if (b <= 0) {  // epochs do not grow with the batch over these points: no critical batch in sight
    b = 0.0;
    a = line.mean_y;
  }
  if (!(a > 0)) return f;
  f.e_min = a;
  f.b_crit = b > 0 ? a / b : std::numeric_limits<double>::infinity();
  double sq = 0.0;
  for (auto [x, y] : xy) sq += (a + b * x - y) * (a + b * x - y);
  f.rms = std::sqrt(sq / xy.size());
  f.valid = true;
  return f;
}

const char* epochs_kind_name(EpochsKind k) {
  switch (k) {
    case EpochsKind::at_point: return "rcp";
    case EpochsKind::interpolated: return "interp";
    case EpochsKind::extrapolated: return "extrap";
    case EpochsKind::constant: return "const";
  }
  return "?";
}

double ConvergenceModel::epochs_min() const {
  if (fit.valid) return fit.e_min;
  return rcps.empty() ? 0.0 : mean_of(rcps.front().epochs);
}

bool ConvergenceModel::past_critical(double global_batch) const {
  return fit.valid && std::isfinite(fit.b_crit) && global_batch > fit.b_crit;
}

ConvergenceModel make_convergence(const std::vector<RcpPoint>& rcps) {
  ConvergenceModel m;
  for (const RcpPoint& p : rcps)
    if (!p.epochs.empty()) m.rcps.push_back(p);
  if (m.rcps.empty())
    throw UserError("no reference convergence points (RCPs) for this scale: no epochs to plan with", 2);
  std::sort(m.rcps.begin(), m.rcps.end(),
            [](const RcpPoint& a, const RcpPoint& b) { return a.global_batch < b.global_batch; });
  m.fit = fit_mccandlish(m.rcps);
  char buf[256];
  if (m.rcps.size() == 1 || !m.fit.valid) {
    std::snprintf(buf, sizeof buf,
                  "one convergence point (batch %lld: %.2f epochs): epochs assumed independent of batch",
                  static_cast<long long>(m.rcps.front().global_batch), mean_of(m.rcps.front().epochs));
  } else {
    std::snprintf(buf, sizeof buf,
                  "%zu RCPs, batch %lld..%lld; outside them McCandlish et al. 2018 E(B) = E_min(1 + B/B_crit): "
                  "E_min %.1f epochs, B_crit %.0f (fit RMS %.2f epochs)",
                  m.rcps.size(), static_cast<long long>(m.rcps.front().global_batch),
                  static_cast<long long>(m.rcps.back().global_batch), m.fit.e_min, m.fit.b_crit, m.fit.rms);
  }
  m.summary = buf;
  return m;
}

EpochsEstimate epochs_at(const ConvergenceModel& m, int64_t global_batch) {
  EpochsEstimate e;
  if (m.rcps.size() == 1 || !m.fit.valid) {
    e.epochs = mean_of(m.rcps.front().epochs);
    e.kind = global_batch == m.rcps.front().global_batch ? EpochsKind::at_point : EpochsKind::constant;
    e.note = e.kind == EpochsKind::constant ? "one convergence point: epochs assumed independent of batch"
                                            : m.rcps.front().source;
    return e;
  }
  const RcpLookup look = rcp_reference(m.rcps, global_batch);
  if (look.ref) {
    e.epochs = look.ref->mean;
    e.kind = look.ref->interpolated ? EpochsKind::interpolated : EpochsKind::at_point;
    e.note = look.ref->source;
    return e;
  }
  e.epochs = m.fit.epochs(static_cast<double>(global_batch));
  e.kind = EpochsKind::extrapolated;
  e.note = look.why + ": McCandlish et al. 2018 fit (arXiv:1812.06162)";
  return e;
}

}  // namespace mlpd::scaling
