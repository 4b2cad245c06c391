// Ordinary least squares of y = intercept + slope·x over points, shared by the compute fit
// (step_model) and the convergence fit (convergence).
#pragma once
#include <utility>
#include <vector>

namespace mlpd::scaling {

struct LineFit {
  double slope = 0.0, intercept = 0.0;
  double mean_x = 0.0, mean_y = 0.0;
  double sxx = 0.0, sxy = 0.0;  // centred sums: sxx 0 when every x is the same (slope then 0)
};

inline LineFit fit_line(const std::vector<std::pair<double, double>>& xy) {
  LineFit f;
  if (xy.empty()) return f;
  for (auto [x, y] : xy) {
    f.mean_x += x;
    f.mean_y += y;
  }
  f.mean_x /= static_cast<double>(xy.size());
  f.mean_y /= static_cast<double>(xy.size());
  for (auto [x, y] : xy) {
    f.sxx += (x - f.mean_x) * (x - f.mean_x);
    f.sxy += (x - f.mean_x) * (y - f.mean_y);
  }
  f.slope = f.sxx > 0 ? f.sxy / f.sxx : 0.0;
  f.intercept = f.mean_y - f.slope * f.mean_x;
  return f;
}

}  // namespace mlpd::scaling
