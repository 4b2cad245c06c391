// Finite-difference helpers shared by the kernel tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"

namespace mlpd::test {

inline std::vector<float> random_vec(size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  Rng r{12345, stream};
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * r.uniform();
  return v;
}

// What a loss op adds to its loss sum (kernels/op_signatures.inc): `call` gets a zeroed host double.
template <typename Call>
double added_loss(Call&& call) {
  double sum = 0.0;
  call(&sum);
  return sum;
}

inline double dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// (loss(x + eps) - loss(x - eps)) / the step actually taken in float; x is restored.
inline double central_difference(const std::function<double()>& loss, float& x, float eps) {
  const float saved = x;
  x = saved + eps;
  const double lp = loss();
  x = saved - eps;
  const double lm = loss();
  x = saved;
  return (lp - lm) / (double(saved + eps) - double(saved - eps));
}

// Central differences of loss() w.r.t. x[i] for up to max_checks indices spread over x,
// compared with analytic[i]: |a - num| <= rtol*max(|a|,|num|) + atol.
inline void expect_grad_close(const char* what, const std::function<double()>& loss, float* x,
                              size_t n, const float* analytic, double eps, double rtol, double atol,
                              size_t max_checks = 64) {
  const size_t step = n <= max_checks ? 1 : (n + max_checks - 1) / max_checks;
  for (size_t i = 0; i < n; i += step) {
    const double num = central_difference(loss, x[i], float(eps));
    const double a = analytic[i];
    EXPECT_NEAR(a, num, rtol * std::max(std::fabs(a), std::fabs(num)) + atol)
        << what << " index " << i << " of " << n;
  }
}

}  // namespace mlpd::test
