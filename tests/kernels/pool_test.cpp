#include <gtest/gtest.h>

#include <limits>

#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

size_t in_size(const PoolDims& d) { return size_t(d.n) * d.h * d.w * d.c; }
size_t out_size(const PoolDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c; }

// Distinct values, well apart, so a small perturbation never changes a window's argmax.
std::vector<float> distinct_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * 7919 + seed) % (n * 3 + 1)) * 0.1f;
  return v;
}

class PoolShapes : public ::testing::TestWithParam<PoolDims> {};

TEST_P(PoolShapes, MaxPoolForwardIsWindowMaxAndBackwardMatchesFiniteDifferences) {
  const PoolDims d = GetParam();
  auto x = distinct_values(in_size(d), 3);
  auto r = random_vec(out_size(d), 31);
  std::vector<float> y(out_size(d));
  maxpool_forward(d, x.data(), y.data());
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < d.out_h(); ++oh)
      for (int ow = 0; ow < d.out_w(); ++ow)
        for (int c = 0; c < d.c; ++c) {
          float m = -std::numeric_limits<float>::infinity();
          for (int kh = 0; kh < d.k; ++kh)
            for (int kw = 0; kw < d.k; ++kw) {
              int ih = oh * d.stride - d.pad + kh, iw = ow * d.stride - d.pad + kw;
              if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w)
                m = std::max(m, x[((size_t(n) * d.h + ih) * d.w + iw) * d.c + c]);
            }
          ASSERT_EQ(y[((size_t(n) * d.out_h() + oh) * d.out_w() + ow) * d.c + c], m);
        }
  auto loss = [&] {
    maxpool_forward(d, x.data(), y.data());
    return dot(y.data(), r.data(), y.size());
  };
  std::vector<float> dx(in_size(d), 5.0f);
  maxpool_backward(d, x.data(), r.data(), dx.data());
  expect_grad_close("maxpool dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 1e-3, 500);
}

TEST_P(PoolShapes, AvgPoolBackwardMatchesFiniteDifferences) {
  const PoolDims d = GetParam();
  auto x = random_vec(in_size(d), 32), r = random_vec(out_size(d), 33);
  std::vector<float> y(out_size(d));
  auto loss = [&] {
    avgpool_forward(d, x.data(), y.data());
    return dot(y.data(), r.data(), y.size());
  };
  std::vector<float> dx(in_size(d), 5.0f);
  avgpool_backward(d, r.data(), dx.data());
  expect_grad_close("avgpool dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 1e-3, 500);
}

INSTANTIATE_TEST_SUITE_P(EdgeShapes, PoolShapes,
                         ::testing::Values(PoolDims{1, 5, 7, 3, 3, 2, 1},   // ResNet-50 pool, odd sizes
                                           PoolDims{2, 6, 6, 2, 2, 2, 0},   // classic 2x2/2
                                           PoolDims{1, 5, 7, 3, 3, 1, 0},   // stride 1 overlap
                                           PoolDims{2, 7, 5, 1, 3, 2, 1}));

TEST(MaxPool, TiesSendTheGradientToTheFirstMaximumInScanOrder) {
  PoolDims d{1, 2, 2, 1, 2, 2, 0};
  std::vector<float> x{1.0f, 3.0f, 3.0f, 3.0f}, y(1), dy{2.0f}, dx(4);
  maxpool_forward(d, x.data(), y.data());
  EXPECT_EQ(y[0], 3.0f);
  maxpool_backward(d, x.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 2.0f, 0.0f, 0.0f}));
}

TEST(MaxPool, PaddingNeverWinsAgainstNegativeInputs) {
  PoolDims d{1, 2, 2, 1, 3, 2, 1};
  std::vector<float> x{-4.0f, -3.0f, -2.0f, -5.0f}, y(1), dy{1.0f}, dx(4);
  maxpool_forward(d, x.data(), y.data());
  EXPECT_EQ(y[0], -2.0f);
  maxpool_backward(d, x.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 0.0f, 1.0f, 0.0f}));
}

TEST(GlobalAvgPool, ForwardIsMeanAndBackwardMatchesFiniteDifferences) {
  const int n = 2, hw = 35, c = 3;
  auto x = random_vec(size_t(n) * hw * c, 41), r = random_vec(size_t(n) * c, 42);
  std::vector<float> y(n * c);
  global_avgpool_forward(x.data(), n, hw, c, y.data());
  double s = 0;
  for (int p = 0; p < hw; ++p) s += x[size_t(hw + p) * c + 2];
  EXPECT_NEAR(y[c + 2], s / hw, 1e-6);
  auto loss = [&] {
    global_avgpool_forward(x.data(), n, hw, c, y.data());
    return dot(y.data(), r.data(), y.size());
  };
  std::vector<float> dx(x.size(), 9.0f);
  global_avgpool_backward(r.data(), n, hw, c, dx.data());
  expect_grad_close("gap dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 1e-4, 300);
}

}  // namespace
