// Epochs to the quality target against the global batch, from the benchmark's reference convergence
// points (ScaleSpec::rcps: MLCommons' RCPs at reference scale, our calibration at mini).
//
//   inside the RCPs: rcp_reference's linear interpolation of the points' means (src/mlperf/rcp.h),
//                    the same numbers the RCP check compares against.
//   outside:         McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of Large-Batch
//                    Training" (arXiv:1812.06162), eq. 2.11 read in epochs: E(B) = E_min·(1 + B/B_crit)
//                    (B_crit their B_noise: past it, doubling the batch no longer halves the steps).
//                    Fitted to the points' means by least squares (E = a + b·B, linear in a, b:
//                    E_min = a, B_crit = a / b); flagged `extrapolated`.
//   one point:       epochs held constant at that point's mean, and the estimate says so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"

namespace mlpd::scaling {

struct McCandlishFit {
  double e_min = 0.0;                        // epochs at a vanishing batch
  double b_crit = 0.0;                       // critical batch (samples); +inf when epochs do not grow with the batch
  double rms = 0.0;                          // RMS of (fit − mean) over the points, epochs
  bool valid = false;                        // >= 2 points with distinct batches and a positive E_min
  double epochs(double global_batch) const;  // E_min · (1 + B / B_crit)
};
// Least squares on (global_batch, mean epochs) pairs; invalid with fewer than two distinct batches.
McCandlishFit fit_mccandlish(const std::vector<RcpPoint>& rcps);

enum class EpochsKind { at_point, interpolated, extrapolated, constant };
const char* epochs_kind_name(EpochsKind k);  // "rcp", "interp", "extrap", "const"

struct EpochsEstimate {
  double epochs = 0.0;
  EpochsKind kind = EpochsKind::at_point;
  std::string note;  // why extrapolated / constant; the RCP source otherwise
};

struct ConvergenceModel {
  std::vector<RcpPoint> rcps;  // ascending in batch
  McCandlishFit fit;
  std::string summary;                            // one line: the points and the fit, or the one-point assumption
  double epochs_min() const;                      // E_min of the fit; with one point, that point's mean
  bool past_critical(double global_batch) const;  // B > B_crit (E(B) > 2·E_min); false with one point
};
// UserError (exit 2) when `rcps` is empty (nothing to predict convergence from).
ConvergenceModel make_convergence(const std::vector<RcpPoint>& rcps);
EpochsEstimate epochs_at(const ConvergenceModel& m, int64_t global_batch);

}  // namespace mlpd::scaling
