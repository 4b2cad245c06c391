// Finite differences of a whole model: a few entries of every parameter view against the store's
// analytic gradients. Batch norm over a few images and ReLU kinks everywhere: steps of 1e-3 and
// more cross kinks for some entries, steps of 1e-4 meet float rounding for others, so each entry
// must match (5% relative + 2e-3 absolute) at one of five steps; a wrong gradient matches none.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "../kernels/grad_check.h"
#include "core/param_store.h"
#include "core/rng.h"

namespace mlpd::test {

// store.grads holds the analytic gradient of f at store.params; f recomputes from store.params.
inline void expect_view_grads_match(ParamStore& store, const std::function<double()>& f, int per_view = 2) {
  Rng pick{5, 0};
  for (size_t v = 0; v < store.views.size(); ++v) {
    for (int t = 0; t < per_view; ++t) {
      const size_t i = store.views[v].offset + size_t(pick.next_u64() % store.views[v].count);
      float& p = store.params[i];
      const double a = store.grads[i];
      bool ok = false;
      std::vector<double> numeric;
      for (float eps : {1e-4f, 3e-4f, 1e-3f, 3e-3f, 1e-2f}) {
        numeric.push_back(central_difference(f, p, eps));
        if (std::fabs(a - numeric.back()) <= 0.05 * std::max(std::fabs(a), std::fabs(numeric.back())) + 2e-3) ok = true;
      }
      EXPECT_TRUE(ok) << store.views[v].name << " entry " << i << ": analytic " << a << ", numeric " << numeric[0]
                      << " " << numeric[1] << " " << numeric[2] << " " << numeric[3] << " " << numeric[4];
    }
  }
}

// ready() must be called once per view, in reverse registration order (what the buckets expect).
inline void expect_reverse_view_order(const ParamStore& store, const std::vector<size_t>& order) {
  ASSERT_EQ(order.size(), store.views.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], order.size() - 1 - i);
}

}  // namespace mlpd::test
