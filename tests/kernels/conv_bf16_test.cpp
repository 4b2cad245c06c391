// The bf16 direct convolution (kernels/cpu/conv_direct_bf16.cpp): every pass against the naive
// convolution in double of the operands rounded to bf16. What a pass overwrites (y, dx) must be
// that reference rounded to bf16; what it accumulates into (dw, dx when asked) the reference itself.
//  - On small integers every product and sum is exact, so the kernel must give the reference bit
//    for bit: a packing or index slip cannot hide inside a tolerance.
//  - On random values: where it accumulates, within fp32 summation error of the reference, far
//    tighter than the error of unrounded operands (so the test also sees that the kernel rounds
//    them); where it overwrites, within one bf16 ulp of the rounded reference and equal to it bit
//    for bit almost everywhere (a sum within fp32 error only rounds the other way next to a tie).
// And the bf16 op table runs it where the rule picks it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bf16_values.h"
#include "conv_reference.h"
#include "core/arena.h"
#include "core/bf16.h"
#include "grad_check.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/op_table.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

std::vector<float> small_integers(size_t n, uint64_t stream) {
  std::vector<float> v = random_vec(n, stream, -2.5f, 2.5f);
  for (float& x : v) x = std::round(x);
  return v;
}

std::string shape_name(const ::testing::TestParamInfo<ConvDims>& info) {
  const ConvDims& d = info.param;
  std::ostringstream name;  // not std::string operator+: g++ 12 warns falsely (-Werror=restrict)
  name << "n" << d.n << "_" << d.h << "x" << d.w << "x" << d.c_in << "to" << d.c_out << "_k" << d.k << "s"
       << d.stride << "p" << d.pad;
  return name.str();
}

class ConvBf16Direct : public ::testing::TestWithParam<ConvDims> {
 protected:
  void SetUp() override { arena_init(arena, direct_conv_bf16_scratch_floats(GetParam()) * sizeof(float) + 4096); }
  bool runs(ConvPass p) const { return direct_conv_bf16_supported(GetParam(), p); }

  // Runs every supported pass: y overwritten, dx overwritten and then accumulated onto 0.5, dw
  // accumulated onto 0.25; each compared with the reference by `check` (base: what it accumulated
  // onto; rounded: whether it overwrote, so must be bf16).
  template <class Check>
  void run_passes(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                  const ConvReference& ref, Check&& check) {
    const ConvDims d = GetParam();
    if (runs(ConvPass::forward)) {
      std::vector<float> y(conv_out_size(d), 123.0f);
      direct_conv_bf16_forward(d, x.data(), w.data(), y.data(), arena);
      check("y", y, ref.y, ref.y_abs, 0.0, true);
    }
    if (runs(ConvPass::backward_data)) {
      std::vector<float> dx(conv_in_size(d), 123.0f);
      direct_conv_bf16_backward_data(d, dy.data(), w.data(), dx.data(), arena, false);
      check("dx", dx, ref.dx, ref.dx_abs, 0.0, true);
      std::vector<float> acc(conv_in_size(d), 0.5f);
      direct_conv_bf16_backward_data(d, dy.data(), w.data(), acc.data(), arena, true);
      check("dx accumulated", acc, ref.dx, ref.dx_abs, 0.5, false);
    }
    if (runs(ConvPass::backward_weights)) {
      std::vector<float> dw(conv_w_size(d), 0.25f);
      direct_conv_bf16_backward_weights(d, x.data(), dy.data(), dw.data(), arena);
      check("dw", dw, ref.dw, ref.dw_abs, 0.25, false);
    }
    EXPECT_EQ(arena.offset, 0u) << "scratch must be released on return";
  }
  Arena arena;
};

TEST_P(ConvBf16Direct, IntegerOperandsGiveTheExactConvolution) {
  const ConvDims d = GetParam();
  if (!runs(ConvPass::forward) && !runs(ConvPass::backward_data) && !runs(ConvPass::backward_weights)) {
    EXPECT_FALSE(conv_bf16_use_direct(d, ConvPass::forward));  // this build: the table rounds instead
    return;
  }
  const auto x = small_integers(conv_in_size(d), 1), w = small_integers(conv_w_size(d), 2);
  const auto dy = small_integers(conv_out_size(d), 3);
  const ConvReference ref = conv_reference(d, x, w, dy);
  run_passes(x, w, dy, ref,
             [](const char* what, const std::vector<float>& got, const std::vector<double>& want,
                const std::vector<double>&, double base, bool rounded) {
               for (size_t i = 0; i < got.size(); ++i) {
                 const float exact = float(want[i] + base);  // an integer (or +0.5, +0.25) below 2^24
                 ASSERT_EQ(f32_bits(got[i]), f32_bits(rounded ? round_to_bf16(exact) : exact))
                     << what << " [" << i << "]";
               }
             });
}

TEST_P(ConvBf16Direct, RandomOperandsAreTheConvolutionOfRoundedOperands) {
  const ConvDims d = GetParam();
  const auto x = random_vec(conv_in_size(d), 4), w = random_vec(conv_w_size(d), 5);
  const auto dy = random_vec(conv_out_size(d), 6);
  const ConvReference ref = conv_reference(d, rounded(x), rounded(w), rounded(dy));
  run_passes(x, w, dy, ref,
             [](const char* what, const std::vector<float>& got, const std::vector<double>& want,
                const std::vector<double>& abs_sum, double base, bool rounded) {
               size_t same = 0;
               for (size_t i = 0; i < got.size(); ++i) {
                 const double sum_error = 1e-5 * abs_sum[i] + 1e-6 * std::fabs(base);
                 if (!rounded) {
                   ASSERT_NEAR(got[i], want[i] + base, sum_error) << what << " [" << i << "]";
                   continue;
                 }
                 const float nearest = round_to_bf16(float(want[i]));
                 ASSERT_TRUE(is_bf16(got[i])) << what << " [" << i << "]";
                 const double one_ulp = std::ldexp(std::fabs(want[i]), -7);
                 ASSERT_NEAR(got[i], nearest, one_ulp + sum_error) << what << " [" << i << "]";
                 same += f32_bits(got[i]) == f32_bits(nearest);
               }
               if (rounded) {
                 EXPECT_GE(double(same), 0.99 * double(got.size())) << what << ": " << same << " bit-equal";
               }
             });
}

TEST_P(ConvBf16Direct, BitIdenticalRunToRun) {
  const ConvDims d = GetParam();
  const auto x = random_vec(conv_in_size(d), 7), w = random_vec(conv_w_size(d), 8);
  const auto dy = random_vec(conv_out_size(d), 9);
  std::vector<float> first[3], again[3];
  for (auto* out : {first, again}) {
    out[0].assign(conv_out_size(d), 0.0f);
    out[1].assign(conv_in_size(d), 0.0f);
    out[2].assign(conv_w_size(d), 0.0f);
    if (runs(ConvPass::forward)) direct_conv_bf16_forward(d, x.data(), w.data(), out[0].data(), arena);
    if (runs(ConvPass::backward_data))
      direct_conv_bf16_backward_data(d, dy.data(), w.data(), out[1].data(), arena, false);
    if (runs(ConvPass::backward_weights))
      direct_conv_bf16_backward_weights(d, x.data(), dy.data(), out[2].data(), arena);
  }
  for (int p = 0; p < 3; ++p)
    ASSERT_EQ(0, std::memcmp(first[p].data(), again[p].data(), sizeof(float) * first[p].size())) << "pass " << p;
}

std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

void expect_same_bits(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << " [" << i << "]";
}

// An activation kept as bf16 bits, packed as it is: the bits of the fp32 pass on its widened values
// (whose rounding as they are packed changes nothing), in every operand position that takes one.
TEST_P(ConvBf16Direct, Bf16BitOperandsGiveTheBitsOfTheirWidenedValues) {
  const ConvDims d = GetParam();
  const auto x = rounded(random_vec(conv_in_size(d), 14)), w = random_vec(conv_w_size(d), 15);
  const auto dy = rounded(random_vec(conv_out_size(d), 16)), dw0 = random_vec(conv_w_size(d), 17);
  const auto x16 = bf16_bits(x), dy16 = bf16_bits(dy);
  if (runs(ConvPass::forward)) {
    std::vector<float> want(conv_out_size(d)), got(conv_out_size(d));
    direct_conv_bf16_forward(d, x.data(), w.data(), want.data(), arena);
    direct_conv_bf16_forward(d, x16.data(), w.data(), got.data(), arena);
    expect_same_bits("y", got, want);
  }
  if (runs(ConvPass::backward_data)) {
    for (bool accumulate : {false, true}) {
      std::vector<float> want(conv_in_size(d), 0.5f), got(conv_in_size(d), 0.5f);
      direct_conv_bf16_backward_data(d, dy.data(), w.data(), want.data(), arena, accumulate);
      direct_conv_bf16_backward_data(d, dy16.data(), w.data(), got.data(), arena, accumulate);
      expect_same_bits(accumulate ? "dx accumulated" : "dx", got, want);
    }
  }
  if (runs(ConvPass::backward_weights)) {
    std::vector<float> want = dw0, got_x16 = dw0, got_dy16 = dw0;
    direct_conv_bf16_backward_weights(d, x.data(), dy.data(), want.data(), arena);
    direct_conv_bf16_backward_weights(d, x16.data(), dy.data(), got_x16.data(), arena);
    direct_conv_bf16_backward_weights(d, x.data(), dy16.data(), got_dy16.data(), arena);
    expect_same_bits("dw from x16", got_x16, want);
    expect_same_bits("dw from dy16", got_dy16, want);
  }
  EXPECT_EQ(arena.offset, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvBf16Direct,
    ::testing::Values(  // n, h, w, c_in, c_out, k, stride, pad
        ConvDims{1, 5, 7, 16, 16, 3, 1, 1},   // batch 1, odd sizes (an odd output row for dw's pixel pairs)
        ConvDims{2, 7, 5, 16, 32, 3, 2, 1},   // stride 2, two vectors of output channels
        ConvDims{1, 9, 7, 32, 64, 3, 2, 1},   // stride 2, c_out 64
        ConvDims{2, 6, 6, 64, 64, 3, 1, 1},   // 64 channels at stride 1
        ConvDims{1, 9, 9, 64, 32, 3, 2, 1},   // a pixel stride with no compiled-in tile (runtime stride)
        ConvDims{1, 7, 9, 16, 48, 3, 1, 0},   // c_out 48 (32 + 16 blocks), no padding
        ConvDims{1, 4, 4, 16, 16, 3, 1, 2},   // padding wider than half the kernel
        ConvDims{2, 5, 31, 16, 16, 3, 1, 1},  // a row longer than one register tile
        ConvDims{1, 5, 33, 32, 32, 3, 1, 1},  // a row of 33 at two vectors
        ConvDims{2, 7, 7, 1, 16, 3, 1, 1},    // c_in 1: one channel and a zero in each pair
        ConvDims{2, 9, 9, 3, 16, 7, 2, 3},    // 7x7/2 stem, c_in 3 (odd)
        ConvDims{2, 6, 5, 16, 32, 1, 2, 0},   // 1x1 stride 2: parity classes no tap reaches
        ConvDims{1, 8, 8, 16, 16, 5, 3, 2},   // k 5, stride 3
        ConvDims{1, 5, 6, 16, 17, 3, 1, 1},   // c_out 17: backward data's odd channel pair
        ConvDims{1, 6, 6, 24, 32, 3, 1, 1},   // c_in 24: weight tiles of 12 input channels
        ConvDims{2, 5, 7, 32, 8, 3, 2, 1},    // c_out 8: only backward data runs
        ConvDims{1, 5, 7, 3, 4, 3, 1, 1}),    // no pass runs
    shape_name);

TEST(ConvBf16Rule, PicksTheKernelOnlyWhereItRuns) {
  const ConvDims resnet{8, 28, 28, 16, 16, 3, 1, 1}, odd{8, 28, 28, 3, 4, 3, 1, 1}, stem{8, 28, 28, 1, 16, 3, 1, 1};
  for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    EXPECT_EQ(conv_bf16_use_direct(resnet, p), direct_conv_bf16_supported(resnet, p)) << int(p);
    EXPECT_FALSE(conv_bf16_use_direct(odd, p)) << int(p);
    if (p != ConvPass::backward_data) {  // one input channel: the rounded fp32 path measured faster
      EXPECT_FALSE(conv_bf16_use_direct(stem, p)) << int(p);
    }
    conv_bf16_set_direct_enabled(false);
    EXPECT_FALSE(conv_bf16_use_direct(resnet, p)) << int(p);
    conv_bf16_set_direct_enabled(true);
  }
  std::printf("bf16 direct convolution in this build: %s\n",
              direct_conv_bf16_supported(resnet, ConvPass::forward) ? "yes" : "no");
}

// Through the bf16 op table on a shape its rule gives to the kernel: outputs rounded to bf16 and
// within 2 bf16 ulps of the fp32 convolution of rounded operands (the table's other path, which
// sums in another order); dw accumulates in fp32.
TEST(ConvBf16Table, RunsTheDirectKernelWhereTheRulePicksIt) {
  const ConvDims d{2, 8, 8, 16, 32, 3, 1, 1};
  const OpTable& t = ops_for(Device::cpu, Precision::bf16);
  Arena arena;
  // Sized for both paths: with the kernel off, every pass runs on rounded fp32 operands.
  conv_bf16_set_direct_enabled(false);
  const size_t rounded_scratch = t.conv2d_scratch_floats(d);
  conv_bf16_set_direct_enabled(true);
  arena_init(arena, std::max(rounded_scratch, t.conv2d_scratch_floats(d)) * sizeof(float) + 4096);
  const auto x = random_vec(conv_in_size(d), 10), w = random_vec(conv_w_size(d), 11);
  const auto dy = random_vec(conv_out_size(d), 12), dw0 = random_vec(conv_w_size(d), 13);
  struct Outputs {
    std::vector<float> y, dx, dw;
  };
  auto run = [&](bool direct) {
    conv_bf16_set_direct_enabled(direct);
    Outputs o{std::vector<float>(conv_out_size(d)), std::vector<float>(conv_in_size(d)), dw0};
    t.conv2d_forward(d, x.data(), w.data(), o.y.data(), arena);
    t.conv2d_backward_data(d, dy.data(), w.data(), o.dx.data(), arena, false);
    t.conv2d_backward_weights(d, x.data(), dy.data(), o.dw.data(), arena);
    conv_bf16_set_direct_enabled(true);
    EXPECT_EQ(arena.offset, 0u);
    return o;
  };
  const Outputs direct = run(true), rounded_fp32 = run(false);
  auto near = [](const char* what, const std::vector<float>& got, const std::vector<float>& want, bool bf16_out) {
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float tol = bf16_out ? std::ldexp(std::fabs(want[i]), -7) + 1e-6f : 1e-5f * (1 + std::fabs(want[i]));
      ASSERT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
      if (bf16_out) {
        ASSERT_TRUE(is_bf16(got[i])) << what << " [" << i << "]";
      }
      differ += f32_bits(got[i]) != f32_bits(want[i]);
    }
    std::printf("%s: %zu of %zu values differ from the fp32 convolution of rounded operands\n", what, differ,
                got.size());
  };
  near("y", direct.y, rounded_fp32.y, true);
  near("dx", direct.dx, rounded_fp32.dx, true);
  near("dw", direct.dw, rounded_fp32.dw, false);
  EXPECT_GT(count_not_bf16(direct.dw), direct.dw.size() / 2) << "weight gradients accumulate in fp32";
  if (direct_conv_bf16_supported(d, ConvPass::forward)) {
    // The kernel ran: its fp32 sums go in another order, so some dw bits differ.
    EXPECT_NE(0, std::memcmp(direct.dw.data(), rounded_fp32.dw.data(), sizeof(float) * direct.dw.size()));
  }
}

// The table-level passes on a kept bf16 operand (kernels/op_table.h: conv2d_*_bf16_input) give the
// bits of the table's pass on the widened operand, on the kernel's path and on the rounded fp32
// path (the kernel switched off, and a shape it does not run), within the arena they ask for.
TEST(ConvBf16Table, Bf16InputPassesGiveTheBitsOfTheTableOnTheWidenedOperand) {
  const OpTable& t = ops_for(Device::cpu, Precision::bf16);
  for (const ConvDims& d : {ConvDims{2, 8, 8, 16, 32, 3, 1, 1}, ConvDims{2, 7, 5, 3, 4, 3, 2, 1}}) {
    for (bool direct : {true, false}) {
      conv_bf16_set_direct_enabled(direct);
      const auto x = rounded(random_vec(conv_in_size(d), 18)), w = random_vec(conv_w_size(d), 19);
      const auto dy = rounded(random_vec(conv_out_size(d), 20)), dw0 = random_vec(conv_w_size(d), 21);
      const auto x16 = bf16_bits(x), dy16 = bf16_bits(dy);
      for (Bf16Operand kept : {Bf16Operand::image, Bf16Operand::output_gradient}) {
        Arena arena;
        arena_init(arena, conv2d_scratch_floats_bf16_input(Device::cpu, d, kept) * sizeof(float) + 4096);
        const size_t widened = (kept == Bf16Operand::image ? x.size() : dy.size()) * sizeof(float);
        const size_t table_bytes = t.conv2d_scratch_floats(d) * sizeof(float) + 4096;
        if (!direct) {
          EXPECT_GE(arena.capacity, table_bytes + widened) << "the widened operand is counted";
        }
        if (kept == Bf16Operand::image) {
          std::vector<float> want(conv_out_size(d)), got(conv_out_size(d));
          t.conv2d_forward(d, x.data(), w.data(), want.data(), arena);
          conv2d_forward_bf16_input(Device::cpu, d, x16.data(), w.data(), got.data(), arena);
          expect_same_bits("y", got, want);
          std::vector<float> dw_want = dw0, dw_got = dw0;
          t.conv2d_backward_weights(d, x.data(), dy.data(), dw_want.data(), arena);
          conv2d_backward_weights_bf16_input(Device::cpu, d, x16.data(), dy.data(), dw_got.data(), arena);
          expect_same_bits("dw from x16", dw_got, dw_want);
        } else {
          std::vector<float> want(conv_in_size(d)), got(conv_in_size(d));
          t.conv2d_backward_data(d, dy.data(), w.data(), want.data(), arena, false);
          conv2d_backward_data_bf16_input(Device::cpu, d, dy16.data(), w.data(), got.data(), arena, false);
          expect_same_bits("dx", got, want);
          std::vector<float> dw_want = dw0, dw_got = dw0;
          t.conv2d_backward_weights(d, x.data(), dy.data(), dw_want.data(), arena);
          conv2d_backward_weights_bf16_input(Device::cpu, d, x.data(), dy16.data(), dw_got.data(), arena);
          expect_same_bits("dw from dy16", dw_got, dw_want);
        }
        EXPECT_EQ(arena.offset, 0u);
      }
      conv_bf16_set_direct_enabled(true);
    }
  }
}

}  // namespace
