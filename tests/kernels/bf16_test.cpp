// The bf16 compute precision on the CPU: the rounding (by hand at the edges, and the same bits as
// the bf16 gradient wire format), and the bf16 op table: each wrapped op equals the fp32 op on
// operands rounded to bf16, with what it overwrites rounded and what it accumulates left in fp32
// (bit for bit on gemm_bf16's widen path; its native kernel is tested in gemm_bf16_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/reduce_kernels.h"
#include "core/arena.h"
#include "core/bf16.h"
#include "bf16_values.h"
#include "grad_check.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/op_table.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

// Bitwise equality (NaN payloads included), with the first difference named.
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (f32_bits(got[i]) != f32_bits(want[i]))
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(Bf16, RoundsToNearestWithTiesToEven) {
  const float ulp = std::ldexp(1.0f, -7);  // a bf16 ulp at 1
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + ulp), 1.0f + ulp);
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2), 1.0f);                   // tie: 1 is even
  EXPECT_EQ(round_to_bf16(1.0f + 3 * ulp / 2), 1.0f + 2 * ulp);     // tie: 1 + 2 ulp is even
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2 + ulp / 64), 1.0f + ulp);  // past the tie
  EXPECT_EQ(round_to_bf16(-(1.0f + ulp / 2 + ulp / 64)), -(1.0f + ulp));
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2 - ulp / 64), 1.0f);
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits only in the low bits must not round to infinity.
  EXPECT_TRUE(std::isnan(round_to_bf16(f32_from_bits(0x7f800001u))));
  const float denormal = std::numeric_limits<float>::denorm_min() * 3;
  EXPECT_EQ(round_to_bf16(denormal), 0.0f);  // its bits are all low: 0x00000003 rounds to 0
  EXPECT_EQ(f32_bits(round_to_bf16(-0.0f)), f32_bits(-0.0f));
}

TEST(Bf16, OpHasTheBitsOfTheGradientWireFormat) {
  std::vector<float> x = random_vec(4099, 1, -1000.0f, 1000.0f);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = -std::numeric_limits<float>::infinity();
  x[9] = 1.0f + std::ldexp(1.0f, -8);
  std::vector<float> wire = x;
  round_to_wire(wire.data(), wire.size(), WirePrecision::bf16);
  std::vector<float> op(x.size());
  cpu_ops().bf16_round(x.data(), op.data(), x.size());
  EXPECT_TRUE(same_bits(op, wire));
  EXPECT_EQ(count_not_bf16(op), 0u);
  cpu_ops().bf16_round(x.data(), x.data(), x.size());  // in place
  EXPECT_TRUE(same_bits(x, wire));
}

TEST(Bf16, RowsOpLeavesWhatLiesBetweenTheRows) {
  const int rows = 5, width = 7, ld_x = 9, ld_y = 11;
  const std::vector<float> x = random_vec(size_t(rows) * ld_x, 2);
  std::vector<float> y(size_t(rows) * ld_y, 0.123456789f), want = y;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < width; ++c) want[size_t(r) * ld_y + c] = round_to_bf16(x[size_t(r) * ld_x + c]);
  cpu_ops().bf16_round_rows(x.data(), rows, width, ld_x, y.data(), ld_y);
  EXPECT_TRUE(same_bits(y, want));
}

TEST(Bf16Table, WrapsOnlyTheGemmAndConvolutionOps) {
  const OpTable& f = ops_for(Device::cpu, Precision::fp32);
  const OpTable& b = ops_for(Device::cpu, Precision::bf16);
  EXPECT_EQ(&f, &cpu_ops());
  EXPECT_EQ(b.precision, Precision::bf16);
  EXPECT_EQ(b.device, Device::cpu);
  int wrapped = 0;
#define MLPD_COUNT_WRAPPED(name) wrapped += (b.name != f.name) ? 1 : 0;
  MLPD_FOR_EACH_OP(MLPD_COUNT_WRAPPED)
#undef MLPD_COUNT_WRAPPED
  EXPECT_EQ(wrapped, 7);
  EXPECT_NE(b.gemm, f.gemm);
  EXPECT_NE(b.conv2d_forward, f.conv2d_forward);
  EXPECT_EQ(b.batchnorm_forward_train, f.batchnorm_forward_train);
  EXPECT_EQ(b.softmax_xent, f.softmax_xent);
  EXPECT_EQ(b.sgd_momentum_update, f.sgd_momentum_update);  // fp32 master weights
}

struct GemmCase {
  bool ta, tb;
  int m, n, k, pad;
  float beta;
};

class Bf16Gemm : public ::testing::TestWithParam<GemmCase> {};

// On the widen path, equals the fp32 GEMM of the rounded operands, C rounded where it was
// overwritten (beta 0) and left in fp32 where it accumulates; the padding of A, B and C is neither
// read rounded nor written. The native kernel sums in another order: within 2 bf16 ulps of it
// where rounded, and within fp32 summation error where not.
TEST_P(Bf16Gemm, IsTheFp32GemmOfRoundedOperands) {
  const GemmCase c = GetParam();
  const int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const auto a = random_vec(size_t(a_rows) * lda, 3), b = random_vec(size_t(b_rows) * ldb, 4);
  const auto c0 = random_vec(size_t(c.m) * ldc, 5);
  std::vector<float> want = c0;
  cpu_ops().gemm(c.ta, c.tb, c.m, c.n, c.k, 0.75f, rounded(a).data(), lda, rounded(b).data(), ldb, c.beta,
                 want.data(), ldc);
  if (c.beta == 0.0f)
    for (int r = 0; r < c.m; ++r)
      for (int j = 0; j < c.n; ++j) want[size_t(r) * ldc + j] = round_to_bf16(want[size_t(r) * ldc + j]);
  std::vector<float> got = c0;
  gemm_bf16_set_native_enabled(false);
  ops_for(Device::cpu, Precision::bf16)
      .gemm(c.ta, c.tb, c.m, c.n, c.k, 0.75f, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc);
  gemm_bf16_set_native_enabled(true);
  EXPECT_TRUE(same_bits(got, want));
  std::vector<float> native = c0;
  ops_for(Device::cpu, Precision::bf16)
      .gemm(c.ta, c.tb, c.m, c.n, c.k, 0.75f, a.data(), lda, b.data(), ldb, c.beta, native.data(), ldc);
  for (size_t i = 0; i < native.size(); ++i) {
    if (int(i % size_t(ldc)) >= c.n) {  // the padding of C
      ASSERT_EQ(f32_bits(native[i]), f32_bits(c0[i])) << "[" << i << "]";
      continue;
    }
    const float tol = c.beta == 0.0f ? std::ldexp(std::fabs(want[i]), -7) + 1e-6f : 1e-5f * (1 + std::fabs(want[i]));
    ASSERT_NEAR(native[i], want[i], tol) << "[" << i << "]";
    if (c.beta == 0.0f) {
      ASSERT_TRUE(is_bf16(native[i])) << "[" << i << "]";
    }
  }
  // And it is not the fp32 GEMM: the rounding happened.
  std::vector<float> fp32 = c0;
  cpu_ops().gemm(c.ta, c.tb, c.m, c.n, c.k, 0.75f, a.data(), lda, b.data(), ldb, c.beta, fp32.data(), ldc);
  EXPECT_FALSE(same_bits(got, fp32));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Gemm,
                         ::testing::Values(GemmCase{false, false, 17, 23, 31, 0, 0.0f},
                                           GemmCase{true, false, 17, 23, 31, 3, 0.0f},
                                           GemmCase{false, true, 40, 9, 64, 5, 1.0f},
                                           GemmCase{true, true, 8, 70, 33, 1, 0.0f},
                                           GemmCase{false, false, 64, 64, 64, 0, 1.0f}));

TEST(Bf16Table, LinearRoundsOperandsAndActivationsButNotWeightGradients) {
  const int n = 13, in = 29, out = 11;
  const auto x = random_vec(size_t(n) * in, 6), w = random_vec(size_t(in) * out, 7), b = random_vec(out, 8);
  const auto dy = random_vec(size_t(n) * out, 9), dw0 = random_vec(size_t(in) * out, 10), db0 = random_vec(out, 11);
  const OpTable& f = cpu_ops();
  const OpTable& t = ops_for(Device::cpu, Precision::bf16);

  std::vector<float> y(size_t(n) * out), want_y(y.size());
  gemm_bf16_set_native_enabled(false);
  t.linear_forward(x.data(), n, in, out, w.data(), b.data(), y.data());
  gemm_bf16_set_native_enabled(true);
  f.linear_forward(rounded(x).data(), n, in, out, rounded(w).data(), b.data(), want_y.data());
  EXPECT_TRUE(same_bits(y, rounded(want_y)));

  std::vector<float> dx(size_t(n) * in), dw = dw0, db = db0;
  std::vector<float> want_dx(dx.size()), want_dw = dw0, want_db = db0;
  gemm_bf16_set_native_enabled(false);  // bit for bit against OpenBLAS's order of sums
  t.linear_backward(x.data(), dy.data(), n, in, out, w.data(), dx.data(), dw.data(), db.data());
  gemm_bf16_set_native_enabled(true);
  f.linear_backward(rounded(x).data(), rounded(dy).data(), n, in, out, rounded(w).data(), want_dx.data(),
                    want_dw.data(), nullptr);
  f.bias_grad(dy.data(), n, out, want_db.data());  // a sum, not a product: of dy as it came
  EXPECT_TRUE(same_bits(dx, rounded(want_dx)));
  EXPECT_TRUE(same_bits(dw, want_dw));
  EXPECT_TRUE(same_bits(db, want_db));
  EXPECT_GT(count_not_bf16(dw), dw.size() / 2) << "weight gradients accumulate in fp32";
}

TEST(Bf16Table, ConvolutionRoundsOperandsAndActivationsButNotWeightGradients) {
  ConvDims d;
  d.n = 2, d.h = 9, d.w = 7, d.c_in = 5, d.c_out = 6, d.k = 3, d.stride = 2, d.pad = 1;
  const size_t nx = size_t(d.n) * d.h * d.w * d.c_in, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
  const size_t nw = size_t(d.k) * d.k * d.c_in * d.c_out;
  const auto x = random_vec(nx, 12), w = random_vec(nw, 13), dy = random_vec(ny, 14);
  const auto dw0 = random_vec(nw, 15), dx0 = random_vec(nx, 16);
  const OpTable& f = cpu_ops();
  const OpTable& t = ops_for(Device::cpu, Precision::bf16);
  EXPECT_GE(t.conv2d_scratch_floats(d), f.conv2d_scratch_floats(d) + nx + nw);
  Arena arena, plain;
  arena_init(arena, t.conv2d_scratch_floats(d) * sizeof(float) + 4096);
  arena_init(plain, f.conv2d_scratch_floats(d) * sizeof(float) + 4096);

  std::vector<float> y(ny), want_y(ny);
  t.conv2d_forward(d, x.data(), w.data(), y.data(), arena);
  EXPECT_EQ(arena.offset, 0u) << "the wrapper's scratch is released";
  f.conv2d_forward(d, rounded(x).data(), rounded(w).data(), want_y.data(), plain);
  EXPECT_TRUE(same_bits(y, rounded(want_y)));

  std::vector<float> dx(nx), want_dx(nx);
  t.conv2d_backward_data(d, dy.data(), w.data(), dx.data(), arena, false);
  f.conv2d_backward_data(d, rounded(dy).data(), rounded(w).data(), want_dx.data(), plain, false);
  EXPECT_TRUE(same_bits(dx, rounded(want_dx)));
  // Accumulating into dx: the fp32 sum is kept.
  std::vector<float> acc = dx0, want_acc = dx0;
  t.conv2d_backward_data(d, dy.data(), w.data(), acc.data(), arena, true);
  f.conv2d_backward_data(d, rounded(dy).data(), rounded(w).data(), want_acc.data(), plain, true);
  EXPECT_TRUE(same_bits(acc, want_acc));

  std::vector<float> dw = dw0, want_dw = dw0;
  t.conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), arena);
  f.conv2d_backward_weights(d, rounded(x).data(), rounded(dy).data(), want_dw.data(), plain);
  EXPECT_TRUE(same_bits(dw, want_dw));
  EXPECT_GT(count_not_bf16(dw), nw / 2) << "weight gradients accumulate in fp32";
}

}  // namespace
