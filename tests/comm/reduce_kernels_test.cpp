// Single-process tests of the arithmetic every host allreduce path shares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/reduce_kernels.h"
#include "core/check.h"

using namespace mlpd;

namespace {
float round_one(float x, WirePrecision p) {
  round_to_wire(&x, 1, p);
  return x;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

TEST(WirePrecision, Bf16RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -7);  // bf16 spacing at 1.0
  EXPECT_EQ(round_one(1.0f + ulp / 2, WirePrecision::bf16), 1.0f);              // tie -> even (1.0)
  EXPECT_EQ(round_one(1.0f + 3 * ulp / 2, WirePrecision::bf16), 1.0f + 2 * ulp);  // tie -> even (up)
  EXPECT_EQ(round_one(1.0f + ulp / 4, WirePrecision::bf16), 1.0f);
  EXPECT_EQ(round_one(1.0f + 3 * ulp / 4, WirePrecision::bf16), 1.0f + ulp);
  EXPECT_TRUE(std::isnan(round_one(std::numeric_limits<float>::quiet_NaN(), WirePrecision::bf16)));
  EXPECT_EQ(round_one(std::numeric_limits<float>::infinity(), WirePrecision::bf16), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_one(-3.0f, WirePrecision::bf16), -3.0f);
}

TEST(WirePrecision, Fp16RoundsAndSaturatesToInfinity) {
  EXPECT_EQ(round_one(65504.0f, WirePrecision::fp16), 65504.0f);
  EXPECT_TRUE(std::isinf(round_one(1e5f, WirePrecision::fp16)));
  EXPECT_EQ(round_one(1.0f + std::ldexp(1.0f, -11), WirePrecision::fp16), 1.0f);  // tie -> even
  EXPECT_EQ(round_one(0.1f, WirePrecision::fp16), 0.0999755859375f);
  // Vector and scalar tails agree.
  std::vector<float> x(19);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) + 0.01f;
  std::vector<float> y = x;
  round_to_wire(y.data(), y.size(), WirePrecision::fp16);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], round_one(x[i], WirePrecision::fp16)) << i;
}

TEST(WirePrecision, ParseRejectsUnknownNames) {
  EXPECT_EQ(parse_precision("bf16"), WirePrecision::bf16);
  EXPECT_THROW(parse_precision("fp8"), UserError);
}

TEST(CanonicalSum, AddsInRankOrderAndGroupsByNode) {
  // 1 + 1e8 - 1e8: rank order gives (1 + 1e8) - 1e8 = 0 in fp32; grouping {0},{1,2} gives 1.
  float a = 1.0f, b = 1e8f, c = -1e8f;
  const void* src[3] = {&a, &b, &c};
  float out = -1;
  for (size_t n : {1u}) {
    canonical_sum(src, nullptr, 3, {0}, n, WirePrecision::fp32, &out, nullptr);
    EXPECT_EQ(out, 0.0f);
    canonical_sum(src, nullptr, 3, {0, 1}, n, WirePrecision::fp32, &out, nullptr);
    EXPECT_EQ(out, 1.0f);
    canonical_sum(src, nullptr, 3, {0, 2}, n, WirePrecision::fp32, &out, nullptr);
    EXPECT_EQ(out, 0.0f);  // (1 + 1e8) + (-1e8)
  }
}

TEST(CanonicalSum, StartsFromTheFirstContributionSoNegativeZeroSurvives) {
  float z = -0.0f;
  const void* src[2] = {&z, &z};
  float out = 1;
  canonical_sum(src, nullptr, 2, {0}, 1, WirePrecision::fp32, &out, nullptr);
  EXPECT_EQ(bits(out), bits(-0.0f));
  uint16_t zb;
  encode_wire(&z, &zb, 1, WirePrecision::bf16);
  const void* src16[2] = {&zb, &zb};
  canonical_sum(src16, nullptr, 2, {0}, 1, WirePrecision::bf16, &out, nullptr);
  EXPECT_EQ(bits(out), bits(-0.0f));
}

TEST(CanonicalSum, OwnFp32ContributionMayAliasTheOutputAndIsRoundedLikeTheOthers) {
  const size_t n = 3000;  // several tiles
  std::vector<float> mine(n), other(n);
  std::vector<uint16_t> other_wire(n), out_wire(n);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = 1.0f + 0.001f * static_cast<float>(i);
    other[i] = 0.37f * static_cast<float>(i % 7);
  }
  for (WirePrecision p : {WirePrecision::bf16, WirePrecision::fp16}) {
    std::vector<float> m = mine;
    encode_wire(other.data(), other_wire.data(), n, p);
    const void* src[2] = {nullptr, other_wire.data()};
    const float* f32[2] = {m.data(), nullptr};
    canonical_sum(src, f32, 2, {0}, n, p, m.data(), out_wire.data());  // out aliases own input
    for (size_t i = 0; i < n; ++i) {
      float want = round_one(round_one(mine[i], p) + round_one(other[i], p), p);
      ASSERT_EQ(m[i], want) << i;
      float back;
      decode_wire(&out_wire[i], &back, 1, p);
      ASSERT_EQ(back, want) << i;
    }
  }
}
