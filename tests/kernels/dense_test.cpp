// GEMM, linear, elementwise and the softmax cross-entropy loss.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>

#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

TEST(Gemm, AllTransposeCombinationsMatchNaiveWithBeta) {
  openblas_set_num_threads(1);
  const int m = 5, n = 3, k = 7;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto a = random_vec(m * k, 51), b = random_vec(k * n, 52), c = random_vec(m * n, 53);
      auto c0 = c;
      const int lda = ta ? m : k, ldb = tb ? k : n;
      gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p)
            s += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
          EXPECT_NEAR(c[i * n + j], 0.5 * s + 2.0 * c0[i * n + j], 1e-5) << ta << tb;
        }
    }
}

TEST(Linear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int n = 3, in = 5, out = 4;
  auto x = random_vec(n * in, 61), w = random_vec(in * out, 62), b = random_vec(out, 63), r = random_vec(n * out, 64);
  std::vector<float> y(n * out);
  auto loss = [&] {
    linear_forward(x.data(), n, in, out, w.data(), b.data(), y.data());
    return dot(y.data(), r.data(), y.size());
  };
  std::vector<float> dx(n * in, 3.0f), dw(in * out, 0.0f), db(out, 0.0f);
  linear_backward(x.data(), r.data(), n, in, out, w.data(), dx.data(), dw.data(), db.data());
  expect_grad_close("dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 1e-3);
  expect_grad_close("dw", loss, w.data(), w.size(), dw.data(), 1e-2, 1e-3, 1e-3);
  expect_grad_close("db", loss, b.data(), b.size(), db.data(), 1e-2, 1e-3, 1e-3);
  auto dw1 = dw, db1 = db;
  linear_backward(x.data(), r.data(), n, in, out, w.data(), nullptr, dw.data(), db.data());
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], 2 * dw1[i], 1e-5);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], 2 * db1[i], 1e-5);
}

TEST(Elementwise, ReluAndResidualAddForwardBackward) {
  std::vector<float> x{-1.0f, 0.0f, 2.0f, -0.5f}, y(4), dy{1.0f, 2.0f, 3.0f, 4.0f}, dx(4);
  relu_forward(x.data(), y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 2.0f, 0.0f}));
  relu_backward(y.data(), dy.data(), dx.data(), 4);
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 0.0f, 3.0f, 0.0f}));  // zero at the kink
  std::vector<float> b{0.5f, 0.5f, -3.0f, 1.0f}, s(4);
  add_forward(x.data(), b.data(), s.data(), 4);
  EXPECT_EQ(s, (std::vector<float>{-0.5f, 0.5f, -1.0f, 0.5f}));
  add_relu_forward(x.data(), b.data(), s.data(), 4);
  EXPECT_EQ(s, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
}

TEST(SoftmaxXent, LabelSmoothedLossMatchesHandComputedValue) {
  // logits (0, ln 2, ln 5): softmax = (1/8, 2/8, 5/8). label 1, smoothing 0.3 over 3 classes:
  // t = (0.1, 0.8, 0.1); loss = -(0.1 ln(1/8) + 0.8 ln(2/8) + 0.1 ln(5/8)).
  std::vector<float> z{0.0f, float(std::log(2.0)), float(std::log(5.0))};
  int32_t label = 1;
  std::vector<float> dz(3);
  int correct = -1;
  double loss = 0.0;
  softmax_xent(z.data(), &label, 1, 3, 0.3f, 2.0f, dz.data(), &loss, &correct);
  const double expect = -(0.1 * std::log(1.0 / 8) + 0.8 * std::log(2.0 / 8) + 0.1 * std::log(5.0 / 8));
  EXPECT_NEAR(loss, expect, 1e-6);
  EXPECT_NEAR(dz[0], 2.0 * (1.0 / 8 - 0.1), 1e-6);
  EXPECT_NEAR(dz[1], 2.0 * (2.0 / 8 - 0.8), 1e-6);
  EXPECT_NEAR(dz[2], 2.0 * (5.0 / 8 - 0.1), 1e-6);
  EXPECT_EQ(correct, 0);  // argmax is class 2
}

TEST(SoftmaxXent, InPlaceGivesTheBitsOfSeparateBuffers) {
  // gnmt and transformer write the gradient over their logits.
  const int n = 5, classes = 11;
  const auto z = random_vec(n * classes, 73, -3.0f, 3.0f);
  const std::vector<int32_t> labels{0, 10, 4, 4, 7};
  std::vector<float> dz(z.size()), in_place = z;
  int correct = -1, correct_in_place = -2;
  double loss = 0.0, loss_in_place = 0.0;
  softmax_xent(z.data(), labels.data(), n, classes, 0.1f, 0.5f, dz.data(), &loss, &correct);
  softmax_xent(in_place.data(), labels.data(), n, classes, 0.1f, 0.5f, in_place.data(), &loss_in_place,
               &correct_in_place);
  EXPECT_EQ(loss, loss_in_place);
  EXPECT_EQ(correct, correct_in_place);
  EXPECT_EQ(dz, in_place);
}

TEST(SoftmaxXent, SumsOverSamplesCountsCorrectAndGradientMatchesFiniteDifferences) {
  const int n = 4, classes = 7;
  auto z = random_vec(n * classes, 71, -3.0f, 3.0f);
  std::vector<int32_t> labels{0, 6, 3, 3};
  int expect_correct = 0;
  for (int i = 0; i < n; ++i) {
    int arg = 0;
    for (int j = 1; j < classes; ++j)
      if (z[i * classes + j] > z[i * classes + arg]) arg = j;
    expect_correct += arg == labels[i];
  }
  labels[2] = [&] {  // make sample 2 correct for sure
    int arg = 0;
    for (int j = 1; j < classes; ++j)
      if (z[2 * classes + j] > z[2 * classes + arg]) arg = j;
    return arg;
  }();
  expect_correct = 0;
  for (int i = 0; i < n; ++i) {
    int arg = 0;
    for (int j = 1; j < classes; ++j)
      if (z[i * classes + j] > z[i * classes + arg]) arg = j;
    expect_correct += arg == labels[i];
  }
  ASSERT_GE(expect_correct, 1);
  std::vector<float> dz(z.size());
  int correct = -1;
  double total = 0.0;
  softmax_xent(z.data(), labels.data(), n, classes, 0.1f, 1.0f, dz.data(), &total, &correct);
  EXPECT_EQ(correct, expect_correct);
  double parts = 0;  // each sample's loss added onto one sum
  for (int i = 0; i < n; ++i)
    softmax_xent(z.data() + i * classes, &labels[i], 1, classes, 0.1f, 1.0f, nullptr, &parts, nullptr);
  EXPECT_NEAR(total, parts, 1e-9);
  auto loss = [&] {
    return added_loss(
        [&](double* l) { softmax_xent(z.data(), labels.data(), n, classes, 0.1f, 1.0f, nullptr, l, nullptr); });
  };
  expect_grad_close("dlogits", loss, z.data(), z.size(), dz.data(), 1e-3, 1e-2, 1e-4);
}

}  // namespace
