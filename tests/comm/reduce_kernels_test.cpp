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

TEST(CanonicalSum, AddsInRankOrder) {
  // 1 + 1e8 - 1e8: rank order gives (1 + 1e8) - 1e8 = 0 in fp32; 1 + (1e8 - 1e8) would give 1.
  float a = 1.0f, b = 1e8f, c = -1e8f;
  const void* src[3] = {&a, &b, &c};
  float out = -1;
  canonical_sum(src, nullptr, 3, 1, WirePrecision::fp32, &out, nullptr);
  EXPECT_EQ(out, 0.0f);
  const void* rev[3] = {&c, &b, &a};
  canonical_sum(rev, nullptr, 3, 1, WirePrecision::fp32, &out, nullptr);
  EXPECT_EQ(out, 1.0f);  // (-1e8 + 1e8) + 1: the order given is the order used
}

// A chain node by node (2 + 2 ranks, 1 + 3, 3 + 1, 1 + 1 + 1 + 1) continues one partial, so it has
// the bits of one pass over 4 ranks; the sum of node sums, (x0 + x1) + (x2 + x3), does not. fp32
// (fused path, and tiles of several lengths) and bf16 (tiled path, rounded inputs and result).
TEST(CanonicalSum, AChainNodeByNodeHasTheBitsOfOnePassAndNodeSumsDoNot) {
  const size_t n = 2500;  // several tiles, a ragged tail
  std::vector<std::vector<float>> x(4, std::vector<float>(n));
  for (size_t i = 0; i < n; ++i) {
    // Element pattern 0: x = 1, 0, 2^-24, 2^-24: rank order 1 (each 2^-24 is a tie to even),
    // node sums 1 + 2^-23. Others: mixed magnitudes and signs, -0.0 everywhere at i % 7 == 3.
    const float f = static_cast<float>(i);
    x[0][i] = i % 7 == 0 ? 1.0f : std::sin(f) * std::pow(10.0f, static_cast<float>(i % 5) - 2);
    x[1][i] = i % 7 == 0 ? 0.0f : std::cos(3 * f) * 1000.0f;
    x[2][i] = i % 7 == 0 ? std::ldexp(1.0f, -24) : -x[1][i] * (1.0f + std::ldexp(1.0f, -20) * (i % 3));
    x[3][i] = i % 7 == 0 ? std::ldexp(1.0f, -24) : std::sin(7 * f) * 1e-3f;
    if (i % 7 == 3)
      for (auto& r : x) r[i] = -0.0f;
  }
  const void* src[4] = {x[0].data(), x[1].data(), x[2].data(), x[3].data()};
  for (WirePrecision p : {WirePrecision::fp32, WirePrecision::bf16}) {
    std::vector<std::vector<uint16_t>> wire(4, std::vector<uint16_t>(n));
    const void* wsrc[4];
    for (int k = 0; k < 4; ++k) {
      if (p == WirePrecision::fp32) {  // fp32 on the wire is the data itself
        wsrc[k] = src[k];
        continue;
      }
      encode_wire(x[static_cast<size_t>(k)].data(), wire[static_cast<size_t>(k)].data(), n, p);
      wsrc[k] = wire[static_cast<size_t>(k)].data();
    }
    std::vector<float> one(n);
    canonical_sum(wsrc, nullptr, 4, n, p, one.data(), nullptr);
    for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{2, 2}, {1, 3}, {3, 1}, {1, 1, 1, 1}}) {
      std::vector<float> partial(n);
      int k = 0;
      for (size_t g = 0; g < nodes.size(); ++g) {  // node g continues the partial of the nodes before
        sum_in_order(g == 0 ? nullptr : partial.data(), wsrc + k, nullptr, nodes[g], n, p, partial.data());
        k += nodes[g];
      }
      round_to_wire(partial.data(), n, p);
      ASSERT_EQ(std::memcmp(partial.data(), one.data(), n * 4), 0) << precision_name(p) << " nodes of " << nodes[0];
    }
    // Control: the old grouping (node sums added) differs, so a backend doing it fails the tests.
    if (p == WirePrecision::fp32) {
      std::vector<float> a(n), b(n);
      canonical_sum(wsrc, nullptr, 2, n, p, a.data(), nullptr);
      canonical_sum(wsrc + 2, nullptr, 2, n, p, b.data(), nullptr);
      size_t differ = 0;
      for (size_t i = 0; i < n; ++i) differ += a[i] + b[i] != one[i];
      EXPECT_GE(differ, n / 7) << "the test values do not tell the groupings apart";
      EXPECT_EQ(one[0], 1.0f);
      EXPECT_EQ(a[0] + b[0], 1.0f + std::ldexp(1.0f, -23));
      EXPECT_EQ(bits(one[3]), bits(-0.0f));
    }
  }
}

TEST(CanonicalSum, StartsFromTheFirstContributionSoNegativeZeroSurvives) {
  float z = -0.0f;
  const void* src[2] = {&z, &z};
  float out = 1;
  canonical_sum(src, nullptr, 2, 1, WirePrecision::fp32, &out, nullptr);
  EXPECT_EQ(bits(out), bits(-0.0f));
  uint16_t zb;
  encode_wire(&z, &zb, 1, WirePrecision::bf16);
  const void* src16[2] = {&zb, &zb};
  canonical_sum(src16, nullptr, 2, 1, WirePrecision::bf16, &out, nullptr);
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
    canonical_sum(src, f32, 2, n, p, m.data(), out_wire.data());  // out aliases own input
    for (size_t i = 0; i < n; ++i) {
      float want = round_one(round_one(mine[i], p) + round_one(other[i], p), p);
      ASSERT_EQ(m[i], want) << i;
      float back;
      decode_wire(&out_wire[i], &back, 1, p);
      ASSERT_EQ(back, want) << i;
    }
  }
}
