#include <gtest/gtest.h>

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/arena.h"
#include "conv_reference.h"
#include "grad_check.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

std::vector<double> conv_naive(const ConvDims& d, const std::vector<float>& x, const std::vector<float>& w) {
  return conv_reference(d, x, w, {}).y;
}

size_t out_size(const ConvDims& d) { return conv_out_size(d); }
size_t in_size(const ConvDims& d) { return conv_in_size(d); }
size_t w_size(const ConvDims& d) { return conv_w_size(d); }

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

// ---- The direct NHWC path and the im2col+GEMM path, each run explicitly on every shape. ----

// Naive dx and dw (double) for dL/dy = dy.
void conv_naive_grads(const ConvDims& d, const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& dy, std::vector<double>& dx, std::vector<double>& dw) {
  ConvReference r = conv_reference(d, x, w, dy);
  dx = std::move(r.dx);
  dw = std::move(r.dw);
}

struct PathCase {
  ConvDims d;
  bool direct;  // run the direct path (else im2col+GEMM)
};

std::string path_case_name(const ::testing::TestParamInfo<PathCase>& info) {
  const ConvDims& d = info.param.d;
  return std::string(info.param.direct ? "direct" : "gemm") + "_n" + std::to_string(d.n) + "_" +
         std::to_string(d.h) + "x" + std::to_string(d.w) + "x" + std::to_string(d.c_in) + "to" +
         std::to_string(d.c_out) + "_k" + std::to_string(d.k) + "s" + std::to_string(d.stride) +
         "p" + std::to_string(d.pad);
}

class ConvPaths : public ::testing::TestWithParam<PathCase> {
 protected:
  void SetUp() override {
    openblas_set_num_threads(1);
    const ConvDims& d = GetParam().d;
    arena_init(arena, std::max(gemm_conv_scratch_floats(d), direct_conv_scratch_floats(d)) *
                              sizeof(float) + 4096);
  }
  bool runs(ConvPass p) const { return !GetParam().direct || direct_conv_supported(GetParam().d, p); }
  void fwd(const float* x, const float* w, float* y) {
    const ConvDims& d = GetParam().d;
    GetParam().direct ? direct_conv_forward(d, x, w, y, arena) : gemm_conv_forward(d, x, w, y, arena);
  }
  void bwd_data(const float* dy, const float* w, float* dx, bool acc) {
    const ConvDims& d = GetParam().d;
    GetParam().direct ? direct_conv_backward_data(d, dy, w, dx, arena, acc)
                      : gemm_conv_backward_data(d, dy, w, dx, arena, acc);
  }
  void bwd_weights(const float* x, const float* dy, float* dw) {
    const ConvDims& d = GetParam().d;
    GetParam().direct ? direct_conv_backward_weights(d, x, dy, dw, arena)
                      : gemm_conv_backward_weights(d, x, dy, dw, arena);
  }
  Arena arena;
};

TEST_P(ConvPaths, AllPassesMatchNaiveReference) {
  const ConvDims d = GetParam().d;
  auto x = random_vec(in_size(d), 11), w = random_vec(w_size(d), 12), dy = random_vec(out_size(d), 13);
  std::vector<double> dx_ref, dw_ref;
  conv_naive_grads(d, x, w, dy, dx_ref, dw_ref);
  if (runs(ConvPass::forward)) {
    std::vector<float> y(out_size(d), 123.0f);
    fwd(x.data(), w.data(), y.data());
    auto ref = conv_naive(d, x, w);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "y " << i;
  }
  if (runs(ConvPass::backward_data)) {
    std::vector<float> dx(in_size(d), 123.0f);
    bwd_data(dy.data(), w.data(), dx.data(), false);
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], dx_ref[i], 1e-4 * (1 + std::fabs(dx_ref[i]))) << "dx " << i;
    std::vector<float> dx2(in_size(d), 0.5f);  // accumulate onto existing values
    bwd_data(dy.data(), w.data(), dx2.data(), true);
    for (size_t i = 0; i < dx2.size(); ++i) ASSERT_NEAR(dx2[i], dx_ref[i] + 0.5, 1e-4 * (1 + std::fabs(dx_ref[i]))) << "dx acc " << i;
  }
  if (runs(ConvPass::backward_weights)) {
    std::vector<float> dw(w_size(d), 0.25f);  // dw accumulates
    bwd_weights(x.data(), dy.data(), dw.data());
    for (size_t i = 0; i < dw.size(); ++i)
      ASSERT_NEAR(dw[i], dw_ref[i] + 0.25, 2e-4 * (1 + std::fabs(dw_ref[i]))) << "dw " << i;
  }
  EXPECT_EQ(arena.offset, 0u) << "scratch must be released on return";
}

TEST_P(ConvPaths, GradientsMatchFiniteDifferences) {
  const ConvDims d = GetParam().d;
  auto x = random_vec(in_size(d), 14), w = random_vec(w_size(d), 15), r = random_vec(out_size(d), 16);
  std::vector<float> y(out_size(d));
  auto loss = [&] {  // the forward on this path where it has one, else the GEMM forward
    if (runs(ConvPass::forward))
      fwd(x.data(), w.data(), y.data());
    else
      gemm_conv_forward(d, x.data(), w.data(), y.data(), arena);
    return dot(y.data(), r.data(), y.size());
  };
  if (runs(ConvPass::backward_data)) {
    std::vector<float> dx(in_size(d), 7.0f);
    bwd_data(r.data(), w.data(), dx.data(), false);
    expect_grad_close("dx", loss, x.data(), x.size(), dx.data(), 1e-2, 1e-3, 2e-3, 100);
  }
  if (runs(ConvPass::backward_weights)) {
    std::vector<float> dw(w_size(d), 0.0f);
    bwd_weights(x.data(), r.data(), dw.data());
    expect_grad_close("dw", loss, w.data(), w.size(), dw.data(), 1e-2, 1e-3, 2e-3, 100);
  }
}

TEST_P(ConvPaths, BitIdenticalRunToRun) {
  const ConvDims d = GetParam().d;
  auto x = random_vec(in_size(d), 17), w = random_vec(w_size(d), 18), dy = random_vec(out_size(d), 19);
  for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    if (!runs(p)) continue;
    std::vector<float> a, b;
    for (auto* out : {&a, &b}) {
      if (p == ConvPass::forward) {
        out->assign(out_size(d), 0.0f);
        fwd(x.data(), w.data(), out->data());
      } else if (p == ConvPass::backward_data) {
        out->assign(in_size(d), 0.0f);
        bwd_data(dy.data(), w.data(), out->data(), false);
      } else {
        out->assign(w_size(d), 0.0f);
        bwd_weights(x.data(), dy.data(), out->data());
      }
    }
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size())) << "pass " << int(p);
  }
}

std::vector<PathCase> path_cases() {
  const ConvDims shapes[] = {
      // n, h, w, c_in, c_out, k, stride, pad
      {1, 5, 7, 16, 16, 3, 1, 1},     // batch 1, odd sizes, c_out 16 (one vector per pixel)
      {2, 7, 5, 16, 32, 3, 2, 1},     // stride 2, c_out 32 (two vectors)
      {1, 9, 7, 32, 64, 3, 2, 1},     // stride 2, c_out 64, odd sizes
      {2, 6, 6, 64, 64, 3, 1, 1},     // c_out 64 at stride 1
      {1, 7, 9, 16, 48, 3, 1, 0},     // c_out 48 (32 + 16 blocks), no padding
      {1, 4, 4, 16, 16, 3, 1, 2},     // padding wider than half the kernel
      {2, 5, 31, 16, 16, 3, 1, 1},    // a row longer than one register tile (28 + 3)
      {1, 5, 33, 32, 32, 3, 1, 1},    // a row of 33 at two vectors: 3 tiles of 11
      {2, 7, 7, 1, 16, 3, 1, 1},      // stem: c_in 1 (backward data has no direct path)
      {1, 6, 9, 1, 32, 3, 2, 1},      // c_in 1 backward weights at stride 2, c_out 32
      {1, 5, 5, 1, 48, 3, 1, 0},      // c_in 1, c_out 48, no padding
      {1, 6, 6, 1, 16, 5, 1, 2},      // c_in 1 with k 5: the generic weights tile
      {2, 9, 9, 3, 16, 7, 2, 3},      // 7x7/2 stem-like, c_in 3
      {2, 6, 5, 16, 32, 1, 2, 0},     // 1x1 stride 2: parity classes no tap reaches
      {1, 7, 5, 16, 16, 1, 1, 0},     // 1x1 stride 1
      {1, 8, 8, 16, 16, 5, 3, 2},     // k 5, stride 3
      {1, 5, 7, 3, 4, 3, 1, 1},       // channels not multiples of 16: direct unsupported
      {2, 5, 7, 32, 8, 3, 2, 1},      // c_out 8: forward / weights unsupported, data direct
  };
  std::vector<PathCase> v;
  for (bool direct : {true, false})
    for (const auto& d : shapes) v.push_back({d, direct});
  return v;
}

INSTANTIATE_TEST_SUITE_P(DirectAndGemm, ConvPaths, ::testing::ValuesIn(path_cases()), path_case_name);

TEST(ConvDispatch, RuleKeepsGemmWhereDirectIsUnsupportedOrSlower) {
  // Without AVX-512 the direct path is compiled out and every pass takes GEMM.
  const bool direct = direct_conv_supported(ConvDims{1, 4, 4, 16, 16, 3, 1, 1}, ConvPass::forward);
  // channels not multiples of 16
  EXPECT_FALSE(conv_use_direct(ConvDims{1, 5, 7, 3, 4, 3, 1, 1}, ConvPass::forward));
  EXPECT_FALSE(conv_use_direct(ConvDims{1, 5, 7, 3, 4, 3, 1, 1}, ConvPass::backward_data));
  EXPECT_FALSE(conv_use_direct(ConvDims{1, 5, 7, 3, 4, 3, 1, 1}, ConvPass::backward_weights));
  // stem: c_in 1 has no direct backward data, but its own backward-weights tile
  EXPECT_FALSE(conv_use_direct(ConvDims{2, 28, 28, 1, 16, 3, 1, 1}, ConvPass::backward_data));
  EXPECT_EQ(direct, conv_use_direct(ConvDims{2, 28, 28, 1, 16, 3, 1, 1}, ConvPass::forward));
  EXPECT_EQ(direct, conv_use_direct(ConvDims{2, 28, 28, 1, 16, 3, 1, 1}, ConvPass::backward_weights));
  // 1x1: forward on GEMM, the stride-2 backward passes direct, stride 1 all GEMM
  EXPECT_FALSE(conv_use_direct(ConvDims{2, 28, 28, 16, 32, 1, 2, 0}, ConvPass::forward));
  EXPECT_EQ(direct, conv_use_direct(ConvDims{2, 28, 28, 16, 32, 1, 2, 0}, ConvPass::backward_data));
  EXPECT_FALSE(conv_use_direct(ConvDims{2, 28, 28, 16, 32, 1, 1, 0}, ConvPass::backward_data));
  // ResNet-50 stem: forward direct, backward weights (3 input channels) on GEMM
  EXPECT_EQ(direct, conv_use_direct(ConvDims{1, 224, 224, 3, 64, 7, 2, 3}, ConvPass::forward));
  EXPECT_FALSE(conv_use_direct(ConvDims{1, 224, 224, 3, 64, 7, 2, 3}, ConvPass::backward_weights));
  // more than 64 channels: not measured, GEMM
  EXPECT_FALSE(conv_use_direct(ConvDims{1, 14, 14, 256, 256, 3, 1, 1}, ConvPass::forward));
  // every ResNet-20 3x3 conv goes direct in all passes
  for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    EXPECT_EQ(direct, conv_use_direct(ConvDims{64, 28, 28, 16, 16, 3, 1, 1}, p));
    EXPECT_EQ(direct, conv_use_direct(ConvDims{64, 28, 28, 16, 32, 3, 2, 1}, p));
    EXPECT_EQ(direct, conv_use_direct(ConvDims{64, 7, 7, 64, 64, 3, 1, 1}, p));
  }
}

// The public entry points (direct where the rule says so) on the ResNet-20 shapes, batch 1.
TEST(ConvDispatch, ResNet20ShapesMatchNaiveThroughPublicApi) {
  openblas_set_num_threads(1);
  const ConvDims shapes[] = {{1, 28, 28, 1, 16, 3, 1, 1},  {1, 28, 28, 16, 16, 3, 1, 1},
                             {1, 28, 28, 16, 32, 3, 2, 1}, {1, 14, 14, 32, 32, 3, 1, 1},
                             {1, 14, 14, 32, 64, 3, 2, 1}, {1, 7, 7, 64, 64, 3, 1, 1},
                             {1, 28, 28, 16, 32, 1, 2, 0}, {1, 14, 14, 32, 64, 1, 2, 0}};
  for (const ConvDims& d : shapes) {
    Arena arena;
    arena_init(arena, conv2d_scratch_floats(d) * sizeof(float) + 4096);
    auto x = random_vec(in_size(d), 21), w = random_vec(w_size(d), 22), dy = random_vec(out_size(d), 23);
    std::vector<double> dx_ref, dw_ref;
    conv_naive_grads(d, x, w, dy, dx_ref, dw_ref);
    auto y_ref = conv_naive(d, x, w);
    std::vector<float> y(out_size(d)), dx(in_size(d)), dw(w_size(d), 0.0f);
    conv2d_forward(d, x.data(), w.data(), y.data(), arena);
    conv2d_backward_data(d, dy.data(), w.data(), dx.data(), arena, false);
    conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), arena);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_ref[i], 1e-4 * (1 + std::fabs(y_ref[i]))) << i;
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], dx_ref[i], 1e-4 * (1 + std::fabs(dx_ref[i]))) << i;
    for (size_t i = 0; i < dw.size(); ++i) ASSERT_NEAR(dw[i], dw_ref[i], 2e-4 * (1 + std::fabs(dw_ref[i]))) << i;
  }
}

}  // namespace
