#include <gtest/gtest.h>

#include <cblas.h>

#include "core/arena.h"
#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

// Naive direct convolution in double: the reference.
std::vector<double> conv_naive(const ConvDims& d, const std::vector<float>& x, const std::vector<float>& w) {
  const int oh_n = d.out_h(), ow_n = d.out_w();
  std::vector<double> y(size_t(d.n) * oh_n * ow_n * d.c_out, 0.0);
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow)
        for (int co = 0; co < d.c_out; ++co) {
          double s = 0;
          for (int kh = 0; kh < d.k; ++kh)
            for (int kw = 0; kw < d.k; ++kw) {
              const int ih = oh * d.stride - d.pad + kh, iw = ow * d.stride - d.pad + kw;
              if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
              for (int ci = 0; ci < d.c_in; ++ci)
                s += double(x[((size_t(n) * d.h + ih) * d.w + iw) * d.c_in + ci]) *
                     double(w[((size_t(kh) * d.k + kw) * d.c_in + ci) * d.c_out + co]);
            }
          y[((size_t(n) * oh_n + oh) * ow_n + ow) * d.c_out + co] = s;
        }
  return y;
}

size_t out_size(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
size_t in_size(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
size_t w_size(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }

class ConvShapes : public ::testing::TestWithParam<ConvDims> {
 protected:
  void SetUp() override {
    openblas_set_num_threads(1);
    arena_init(arena, conv2d_scratch_floats(GetParam()) * sizeof(float) + 4096);
  }
  Arena arena;
};

TEST_P(ConvShapes, ForwardMatchesNaiveDirectLoop) {
  const ConvDims d = GetParam();
  auto x = random_vec(in_size(d), 1), w = random_vec(w_size(d), 2);
  std::vector<float> y(out_size(d), 123.0f);
  conv2d_forward(d, x.data(), w.data(), y.data(), arena);
  auto ref = conv_naive(d, x, w);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << i;
  EXPECT_EQ(arena.offset, 0u) << "scratch must be released on return";
}

TEST_P(ConvShapes, BackwardDataAndWeightsMatchFiniteDifferences) {
  const ConvDims d = GetParam();
  auto x = random_vec(in_size(d), 3), w = random_vec(w_size(d), 4), r = random_vec(out_size(d), 5);
  std::vector<float> y(out_size(d));
  // loss = sum(r * conv(x, w)), so dL/dy = r.
  auto loss = [&] {
    conv2d_forward(d, x.data(), w.data(), y.data(), arena);
    return dot(y.data(), r.data(), y.size());
  };
  std::vector<float> dx(in_size(d), 7.0f), dw(w_size(d), 0.0f);
  conv2d_backward_data(d, r.data(), w.data(), dx.data(), arena, false);
  conv2d_backward_weights(d, x.data(), r.data(), dw.data(), arena);
  // conv is linear in x and w: central differences are exact up to rounding.
  expect_grad_close("dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 2e-3, 200);
  expect_grad_close("dw", loss, w.data(), w.size(), dw.data(), 1e-2, 1e-3, 2e-3, 200);
}

TEST_P(ConvShapes, GradientsAccumulateWhenAsked) {
  const ConvDims d = GetParam();
  auto x = random_vec(in_size(d), 6), w = random_vec(w_size(d), 7), r = random_vec(out_size(d), 8);
  std::vector<float> dx1(in_size(d)), dx2(in_size(d)), dw1(w_size(d), 0.0f), dw2(w_size(d), 0.0f);
  conv2d_backward_data(d, r.data(), w.data(), dx1.data(), arena, false);
  conv2d_backward_weights(d, x.data(), r.data(), dw1.data(), arena);
  std::fill(dx2.begin(), dx2.end(), 1.0f);
  conv2d_backward_data(d, r.data(), w.data(), dx2.data(), arena, true);
  conv2d_backward_weights(d, x.data(), r.data(), dw2.data(), arena);
  conv2d_backward_weights(d, x.data(), r.data(), dw2.data(), arena);
  for (size_t i = 0; i < dx1.size(); ++i) ASSERT_NEAR(dx2[i], dx1[i] + 1.0f, 1e-4) << i;
  for (size_t i = 0; i < dw1.size(); ++i) ASSERT_NEAR(dw2[i], 2 * dw1[i], 1e-4 * (1 + std::fabs(dw1[i]))) << i;
}

// n, h, w, c_in, c_out, k, stride, pad
INSTANTIATE_TEST_SUITE_P(
    EdgeShapes, ConvShapes,
    ::testing::Values(ConvDims{1, 5, 7, 3, 4, 3, 1, 1},    // batch 1, odd sizes, same padding
                      ConvDims{2, 5, 7, 3, 5, 3, 2, 0},    // stride 2, no padding
                      ConvDims{2, 7, 5, 3, 4, 3, 2, 1},    // stride 2, padding 1
                      ConvDims{1, 5, 7, 3, 2, 3, 1, 0},    // stride 1, no padding
                      ConvDims{2, 6, 5, 3, 4, 1, 2, 0},    // 1x1 projection, stride 2
                      ConvDims{1, 7, 5, 2, 3, 1, 1, 0},    // 1x1 pointwise (pure GEMM)
                      ConvDims{2, 9, 9, 3, 2, 7, 2, 3},    // 7x7/2 stem-like
                      ConvDims{3, 14, 14, 16, 8, 3, 1, 1},  // several im2col chunks
                      ConvDims{2, 4, 4, 1, 3, 3, 1, 2}));   // padding wider than half the kernel

}  // namespace
