// MiniGo's loss ops (kernels/cpu/minigo_ops.cpp): values by hand and gradients by finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/arena.h"
#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;

TEST(MinigoOps, SoftTargetCrossEntropyByHand) {
  Arena a;
  arena_init(a, 4096);
  // One row, logits (0, log 3): softmax (1/4, 3/4); target (1/2, 1/2):
  // loss = -(1/2 log 1/4 + 1/2 log 3/4), gradient (1/4 - 1/2, 3/4 - 1/2) * scale.
  const std::vector<float> z{0.0f, float(std::log(3.0))}, t{0.5f, 0.5f};
  std::vector<float> g(2);
  double loss = 0.0;
  softmax_xent_soft(z.data(), t.data(), 1, 2, 2.0f, g.data(), &loss, a);
  EXPECT_NEAR(loss, -(0.5 * std::log(0.25) + 0.5 * std::log(0.75)), 1e-7);
  EXPECT_NEAR(g[0], -0.5, 1e-6);
  EXPECT_NEAR(g[1], 0.5, 1e-6);
  // A one-hot target gives the ordinary cross-entropy.
  const std::vector<float> onehot{0.0f, 1.0f};
  EXPECT_NEAR(test::added_loss([&](double* l) { softmax_xent_soft(z.data(), onehot.data(), 1, 2, 1.0f, nullptr, l, a); }),
              -std::log(0.75), 1e-7);
}

TEST(MinigoOps, SoftTargetCrossEntropyGradientMatchesFiniteDifferences) {
  Arena a;
  arena_init(a, 4096);
  const int n = 3, c = 7;
  std::vector<float> z = test::random_vec(size_t(n) * c, 1, -3.0f, 3.0f);
  std::vector<float> t = test::random_vec(size_t(n) * c, 2, 0.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < c; ++j) s += t[size_t(i) * c + j];
    for (int j = 0; j < c; ++j) t[size_t(i) * c + j] = float(t[size_t(i) * c + j] / s);
  }
  std::vector<float> g(z.size());
  softmax_xent_soft(z.data(), t.data(), n, c, 0.5f, g.data(), nullptr, a);
  auto f = [&] {
    return 0.5 * test::added_loss([&](double* l) { softmax_xent_soft(z.data(), t.data(), n, c, 1.0f, nullptr, l, a); });
  };
  test::expect_grad_close("policy logits", f, z.data(), z.size(), g.data(), 1e-3, 1e-3, 1e-5);
}

TEST(MinigoOps, TanhSquaredErrorByHandAndByFiniteDifferences) {
  Arena a;
  arena_init(a, 4096);
  // x = atanh(0.5): v = 0.5; z = -1: loss 2.25, gradient 2 * 1.5 * (1 - 0.25) = 2.25.
  std::vector<float> x{float(std::atanh(0.5))}, z{-1.0f}, g(1);
  EXPECT_NEAR(test::added_loss([&](double* l) { tanh_mse(x.data(), z.data(), 1, 1.0f, g.data(), l, a); }), 2.25, 1e-6);
  EXPECT_NEAR(g[0], 2.25, 1e-5);
  std::vector<float> xs = test::random_vec(9, 3, -2.0f, 2.0f), zs = test::random_vec(9, 4, -1.0f, 1.0f), gs(9);
  tanh_mse(xs.data(), zs.data(), 9, 0.25f, gs.data(), nullptr, a);
  auto f = [&] { return 0.25 * test::added_loss([&](double* l) { tanh_mse(xs.data(), zs.data(), 9, 1.0f, nullptr, l, a); }); };
  test::expect_grad_close("value logits", f, xs.data(), xs.size(), gs.data(), 1e-3, 1e-3, 1e-5);
}
