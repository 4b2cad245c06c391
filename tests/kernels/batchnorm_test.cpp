#include <gtest/gtest.h>

#include <cmath>

#include "core/arena.h"
#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

struct BnCase {
  int64_t rows;
  int c;
  bool relu;
  bool residual;
};

class BatchNormGrad : public ::testing::TestWithParam<BnCase> {};

TEST_P(BatchNormGrad, BackwardMatchesFiniteDifferences) {
  const BnCase p = GetParam();
  const size_t n = size_t(p.rows) * p.c;
  auto x = random_vec(n, 11, -2.0f, 2.0f), r = random_vec(n, 12);
  auto gamma = random_vec(p.c, 13, 0.5f, 1.5f), beta = random_vec(p.c, 14, -0.5f, 0.5f);
  auto res = random_vec(n, 15);
  std::vector<float> rm(p.c, 0.0f), rv(p.c, 1.0f), mean(p.c), invstd(p.c), y(n);
  const float* resid = p.residual ? res.data() : nullptr;
  auto loss = [&] {
    batchnorm_forward_train(x.data(), p.rows, p.c, gamma.data(), beta.data(), 0.9f, 1e-5f, rm.data(),
                            rv.data(), mean.data(), invstd.data(), y.data(), resid, p.relu);
    return dot(y.data(), r.data(), n);
  };
  if (p.relu && p.residual) {
    // Keep every pre-activation away from the ReLU kink so central differences are smooth there:
    // the residual does not enter the statistics, so nudging it is free.
    batchnorm_forward_train(x.data(), p.rows, p.c, gamma.data(), beta.data(), 0.9f, 1e-5f, rm.data(),
                            rv.data(), mean.data(), invstd.data(), y.data(), resid, false);
    for (size_t i = 0; i < n; ++i)
      if (std::fabs(y[i]) < 0.05f) res[i] += y[i] < 0 ? -0.1f : 0.1f;
  }
  loss();
  Arena arena;
  arena_init(arena, 1 << 16);
  std::vector<float> dx(n), dgamma(p.c, 0.5f), dbeta(p.c, 0.25f);
  batchnorm_backward(x.data(), r.data(), p.relu ? y.data() : nullptr, p.rows, p.c, gamma.data(),
                     mean.data(), invstd.data(), dx.data(), dgamma.data(), dbeta.data(), arena);
  for (int j = 0; j < p.c; ++j) {  // the initial 0.5 / 0.25 must have been accumulated onto
    dgamma[j] -= 0.5f;
    dbeta[j] -= 0.25f;
  }
  expect_grad_close("dx", loss, x.data(), n, dx.data(), 1e-3, 2e-2, 2e-3, 120);
  expect_grad_close("dgamma", loss, gamma.data(), p.c, dgamma.data(), 1e-3, 1e-2, 2e-3);
  expect_grad_close("dbeta", loss, beta.data(), p.c, dbeta.data(), 1e-3, 1e-2, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormGrad,
                         ::testing::Values(BnCase{35, 3, false, false},  // 1 image of 5x7x3
                                           BnCase{70, 3, true, false},   // 2 images, fused ReLU
                                           BnCase{35, 5, true, true},    // fused residual + ReLU
                                           BnCase{4, 2, false, true},    // tiny batch
                                           // c a multiple of 16: the AVX-512 register paths
                                           // (ReLU only with the residual: the test keeps those
                                           // pre-activations off the kink)
                                           BnCase{70, 16, false, true},  // rows not a block multiple
                                           BnCase{35, 32, true, true},
                                           BnCase{130, 48, false, false},  // 3 vectors, 3 row blocks
                                           BnCase{9, 80, true, true},      // 64 + 16 channel groups
                                           BnCase{20, 64, false, false}));  // fewer rows than a block

TEST(BatchNorm, TrainUsesBatchStatsAndUpdatesRunningStatsWithMomentum) {
  const int64_t rows = 6;
  const int c = 2;
  // channel 0: 1..6 (mean 3.5, biased var 35/12, unbiased 3.5); channel 1: constant 4.
  std::vector<float> x;
  for (int i = 0; i < rows; ++i) {
    x.push_back(float(i + 1));
    x.push_back(4.0f);
  }
  std::vector<float> gamma{2.0f, 1.0f}, beta{0.5f, -1.0f}, rm{1.0f, 0.0f}, rv{1.0f, 2.0f};
  std::vector<float> mean(c), invstd(c), y(rows * c);
  batchnorm_forward_train(x.data(), rows, c, gamma.data(), beta.data(), 0.9f, 1e-5f, rm.data(), rv.data(),
                          mean.data(), invstd.data(), y.data(), nullptr, false);
  EXPECT_NEAR(mean[0], 3.5f, 1e-6);
  EXPECT_NEAR(invstd[0], 1.0 / std::sqrt(35.0 / 12.0 + 1e-5), 1e-5);
  EXPECT_NEAR(rm[0], 0.9f * 1.0f + 0.1f * 3.5f, 1e-6);
  EXPECT_NEAR(rv[0], 0.9f * 1.0f + 0.1f * 3.5f, 1e-5);  // unbiased variance in the running stat
  EXPECT_NEAR(rm[1], 0.1f * 4.0f, 1e-6);
  EXPECT_NEAR(rv[1], 0.9f * 2.0f, 1e-6);
  EXPECT_NEAR(y[1], -1.0f, 1e-5);  // constant channel normalises to beta
  EXPECT_NEAR(y[0], 2.0f * (1.0 - 3.5) / std::sqrt(35.0 / 12.0 + 1e-5) + 0.5f, 1e-4);
}

TEST(BatchNorm, EvalUsesRunningStatsNotBatchStats) {
  const int64_t rows = 8;
  const int c = 3;
  auto x = random_vec(rows * c, 21, -3.0f, 3.0f);
  auto gamma = random_vec(c, 22, 0.5f, 1.5f), beta = random_vec(c, 23);
  std::vector<float> rm{0.5f, -1.0f, 2.0f}, rv{4.0f, 0.25f, 1.0f}, y(rows * c);
  auto rm0 = rm, rv0 = rv;
  batchnorm_forward_eval(x.data(), rows, c, gamma.data(), beta.data(), rm.data(), rv.data(), 1e-5f, y.data(),
                         nullptr, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j)
      EXPECT_NEAR(y[r * c + j], gamma[j] * (x[r * c + j] - rm[j]) / std::sqrt(rv[j] + 1e-5f) + beta[j], 1e-5);
  EXPECT_EQ(rm, rm0);
  EXPECT_EQ(rv, rv0);
  // With running stats equal to the batch's (biased) stats, eval reproduces train.
  std::vector<float> mean(c), invstd(c), yt(rows * c), rm2(c), rv2(c, 1.0f);
  batchnorm_forward_train(x.data(), rows, c, gamma.data(), beta.data(), 0.9f, 1e-5f, rm2.data(), rv2.data(),
                          mean.data(), invstd.data(), yt.data(), nullptr, true);
  std::vector<float> bm(mean), bv(c);
  for (int j = 0; j < c; ++j) bv[j] = 1.0f / (invstd[j] * invstd[j]) - 1e-5f;
  std::vector<float> ye(rows * c);
  batchnorm_forward_eval(x.data(), rows, c, gamma.data(), beta.data(), bm.data(), bv.data(), 1e-5f, ye.data(),
                         nullptr, true);
  for (size_t i = 0; i < ye.size(); ++i) EXPECT_NEAR(ye[i], yt[i], 1e-4);
}

}  // namespace
