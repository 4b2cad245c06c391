// The CUDA NCF ops (embedding gather / scatter-add, GMF, sigmoid + BCE) and optimizer updates
// (SGD, LARS, Adam, LazyAdam, sum of squares) against the CPU ones, through the op tables.
// The scatter-add adds repeated rows in order of i on both devices, so it must match the CPU to
// the bit, at up to a million indices with heavy repeats; it and the reductions must rerun to the
// same bits.
// Tolerances (|got - want| <= abs + rel*|want|): gather, scatter-add and GMF exact; optimizer
// states and parameters 1e-6 + 1e-5*|want| (FMA contraction moves the last bit), LARS trust
// 1e-6 relative, sum of squares 1e-10 relative (double accumulation, another order); BCE sum
// 1e-6 relative, its gradient 1e-6 + 1e-5*|want| (expf/log1pf are not the CPU's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

// ---- Embedding gather / scatter-add ----
enum class Spread { uniform, skewed, one_row };

struct EmbCase {
  int rows, dim, n, ld;  // batch rows have a leading dimension ld >= dim
  Spread spread;
};

std::string emb_name(const ::testing::TestParamInfo<EmbCase>& info) {
  const EmbCase& e = info.param;
  const char* spread = e.spread == Spread::uniform ? "uniform" : e.spread == Spread::skewed ? "skewed" : "onerow";
  return cat("rows", e.rows, "_dim", e.dim, "_n", e.n, "_ld", e.ld, "_", spread);
}

std::vector<int32_t> indices(const EmbCase& e, uint64_t stream) {
  if (e.spread == Spread::uniform) return random_indices(e.n, stream, e.rows);
  std::vector<int32_t> v(e.n, 0);
  if (e.spread == Spread::skewed)  // u^3: the first rows are drawn far more often (popular items)
    for (int i = 0; i < e.n; ++i) {
      const double u = rng_uniform(2024, stream, uint64_t(i));
      v[i] = std::min(e.rows - 1, int32_t(e.rows * u * u * u));
    }
  return v;
}

class EmbeddingGpu : public GpuTestWithParam<EmbCase> {};

TEST_P(EmbeddingGpu, GatherIsExactAndWritesOnlyItsColumns) {
  const EmbCase e = GetParam();
  const int off = e.ld - e.dim;  // write the right-hand column block of each wide row
  const auto table = random_floats(size_t(e.rows) * e.dim, 60);
  const auto idx = indices(e, 61);
  const std::vector<float> out0(size_t(e.n) * e.ld, 777.0f);
  std::vector<float> out = out0;
  cpu().embedding_gather(table.data(), e.dim, idx.data(), e.n, out.data() + off, e.ld);
  DeviceBuffer<float> gtable(table), gout(out0);
  DeviceBuffer<int32_t> gidx(idx);
  gpu().embedding_gather(gtable.get(), e.dim, gidx.get(), e.n, gout.get() + off, e.ld);
  EXPECT_TRUE(all_equal("embedding_gather out", gout.download(), out));
}

TEST_P(EmbeddingGpu, ScatterAddHasTheCpuBitsAndRerunsToThem) {
  const EmbCase e = GetParam();
  const int off = e.ld - e.dim;  // read the right-hand column block of each wide row
  const auto dtable0 = random_floats(size_t(e.rows) * e.dim, 62);
  const auto src = random_floats(size_t(e.n) * e.ld, 63);
  const auto idx = indices(e, 64);
  std::vector<float> want = dtable0;
  cpu().embedding_scatter_add(want.data(), e.dim, idx.data(), e.n, src.data() + off, e.ld);
  DeviceBuffer<float> gsrc(src);
  DeviceBuffer<int32_t> gidx(idx);
  std::vector<float> runs[2];
  for (auto& r : runs) {
    DeviceBuffer<float> gtable(dtable0);
    gpu().embedding_scatter_add(gtable.get(), e.dim, gidx.get(), e.n, gsrc.get() + off, e.ld);
    r = gtable.download();
  }
  EXPECT_TRUE(same_bits("embedding_scatter_add dtable (vs CPU)", runs[0], want));
  EXPECT_TRUE(same_bits("embedding_scatter_add dtable (two runs)", runs[0], runs[1]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingGpu,
                         ::testing::Values(EmbCase{50, 8, 20000, 8, Spread::uniform},         // ~400 repeats a row
                                           EmbCase{138493, 64, 100003, 192, Spread::uniform},  // ml-20m users
                                           EmbCase{26744, 32, 65536, 32, Spread::skewed},     // popular items
                                           EmbCase{7, 17, 1001, 19, Spread::uniform},         // odd dim and ld
                                           EmbCase{1, 3, 5000, 3, Spread::one_row},           // one run of 5000
                                           EmbCase{140000, 8, 1000000, 8, Spread::skewed}),   // an ncf batch
                         emb_name);

TEST_F(GpuTest, EmbeddingOpsWithNoRowsDoNothing) {
  const auto table = random_floats(40, 65);
  DeviceBuffer<float> gtable(table), gout(std::vector<float>(8, 777.0f));
  DeviceBuffer<int32_t> gidx(std::vector<int32_t>{1, 2});
  gpu().embedding_scatter_add(gtable.get(), 4, gidx.get(), 0, gout.get(), 4);
  gpu().embedding_gather(gtable.get(), 4, gidx.get(), 0, gout.get(), 4);
  EXPECT_TRUE(same_bits("dtable", gtable.download(), table));
  EXPECT_TRUE(same_bits("out", gout.download(), std::vector<float>(8, 777.0f)));
}

// ---- GMF ----
struct GmfCase {
  int n, dim, lda, ldb, ldy;
};

class GmfGpu : public GpuTestWithParam<GmfCase> {};

TEST_P(GmfGpu, ForwardAndBackwardAreExact) {
  const GmfCase c = GetParam();
  const auto a = random_floats(size_t(c.n) * c.lda, 70), b = random_floats(size_t(c.n) * c.ldb, 71);
  const auto dy = random_floats(size_t(c.n) * c.ldy, 72);
  const std::vector<float> y0(size_t(c.n) * c.ldy, 777.0f), d0(size_t(c.n) * c.dim, 777.0f);
  std::vector<float> y = y0, da = d0, db = d0;
  cpu().gmf_forward(a.data(), c.lda, b.data(), c.ldb, c.n, c.dim, y.data(), c.ldy);
  cpu().gmf_backward(a.data(), c.lda, b.data(), c.ldb, dy.data(), c.ldy, c.n, c.dim, da.data(), db.data());
  DeviceBuffer<float> ga(a), gb(b), gdy(dy), gy(y0), gda(d0), gdb(d0);
  gpu().gmf_forward(ga.get(), c.lda, gb.get(), c.ldb, c.n, c.dim, gy.get(), c.ldy);
  gpu().gmf_backward(ga.get(), c.lda, gb.get(), c.ldb, gdy.get(), c.ldy, c.n, c.dim, gda.get(), gdb.get());
  EXPECT_TRUE(all_equal("gmf_forward y (padding untouched)", gy.download(), y));
  EXPECT_TRUE(all_equal("gmf_backward da", gda.download(), da));
  EXPECT_TRUE(all_equal("gmf_backward db", gdb.download(), db));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GmfGpu,
                         ::testing::Values(GmfCase{1, 1, 1, 1, 1}, GmfCase{1000, 64, 64, 192, 128},
                                           GmfCase{4097, 8, 24, 8, 16}, GmfCase{65537, 64, 64, 64, 64}),
                         [](const ::testing::TestParamInfo<GmfCase>& i) {
                           const GmfCase& c = i.param;
                           return cat("n", c.n, "_dim", c.dim, "_ld", c.lda, "_", c.ldb, "_", c.ldy);
                         });

// ---- Sigmoid + binary cross-entropy ----
struct BceCase {
  int n;
  float zmax;       // logits uniform in [-zmax, zmax]
  bool fractional;  // labels in [0, 1] instead of 0 or 1
};

class BceGpu : public GpuTestWithParam<BceCase> {};

std::vector<float> bce_labels(const BceCase& c, uint64_t stream) {
  if (c.fractional) return random_floats(c.n, stream, 0.0f, 1.0f);
  std::vector<float> v(c.n);
  for (int i = 0; i < c.n; ++i) v[i] = float(rng_below(2024, stream, uint64_t(i), 2));
  return v;
}

TEST_P(BceGpu, SumAndGradientMatchCpuAndRerunToTheSameBits) {
  const BceCase c = GetParam();
  const auto z = random_floats(c.n, 80, -c.zmax, c.zmax), y = bce_labels(c, 81);
  const float scale = 0.25f;
  std::vector<float> dz(c.n);
  double sum = 0.0;
  cpu().sigmoid_bce(z.data(), y.data(), c.n, scale, dz.data(), &sum);
  DeviceBuffer<float> gz(z), gy(y), gdz(std::vector<float>(c.n, 777.0f)), gdz2(c.n);
  DeviceLossSum loss;
  gpu().sigmoid_bce(gz.get(), gy.get(), c.n, scale, gdz.get(), loss.get());
  const double gsum = loss.read();
  EXPECT_TRUE(scalar_close("sigmoid_bce sum", gsum, sum, 1e-6, 1e-6));
  EXPECT_TRUE(all_close("sigmoid_bce dlogits", gdz.download(), dz, 1e-5, 1e-6));

  loss.zero();
  gpu().sigmoid_bce(gz.get(), gy.get(), c.n, scale, gdz2.get(), loss.get());
  const double again = loss.read();
  loss.zero();
  gpu().sigmoid_bce(gz.get(), gy.get(), c.n, scale, nullptr, loss.get());
  const double bare = loss.read();
  EXPECT_TRUE(same_bits("sigmoid_bce sum (two runs)", std::vector<double>{again}, std::vector<double>{gsum}));
  EXPECT_TRUE(same_bits("sigmoid_bce sum (without dlogits)", std::vector<double>{bare}, std::vector<double>{gsum}));
  EXPECT_TRUE(same_bits("sigmoid_bce dlogits (two runs)", gdz2.download(), gdz.download()));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BceGpu,
                         ::testing::Values(BceCase{1, 3.0f, false}, BceCase{1000, 3.0f, true},
                                           BceCase{1000003, 30.0f, false}, BceCase{65536, 8.0f, true}),
                         [](const ::testing::TestParamInfo<BceCase>& i) {
                           const BceCase& c = i.param;
                           return cat("n", c.n, "_zmax", int(c.zmax), c.fractional ? "_soft_labels" : "_binary_labels");
                         });

// ---- Optimizer updates ----
class OptimGpu : public GpuTestWithParam<size_t> {};

constexpr double kRel = 1e-5, kAbs = 1e-6;

TEST_P(OptimGpu, SgdMomentumMatchesCpu) {
  const size_t n = GetParam();
  const auto p0 = random_floats(n, 90), g = random_floats(n, 91), m0 = random_floats(n, 92, -0.1f, 0.1f);
  std::vector<float> p = p0, m = m0;
  cpu().sgd_momentum_update(p.data(), g.data(), m.data(), n, 0.1f, 0.9f, 0.01f);
  DeviceBuffer<float> gp(p0), gg(g), gm(m0);
  gpu().sgd_momentum_update(gp.get(), gg.get(), gm.get(), n, 0.1f, 0.9f, 0.01f);
  EXPECT_TRUE(all_close("sgd p", gp.download(), p, kRel, kAbs));
  EXPECT_TRUE(all_close("sgd m", gm.download(), m, kRel, kAbs));
}

TEST_P(OptimGpu, LarsMatchesCpuWithAndWithoutTrust) {
  const size_t n = GetParam();
  const auto p0 = random_floats(n, 93), g = random_floats(n, 94, -0.01f, 0.01f);
  const auto m0 = random_floats(n, 95, -0.01f, 0.01f);
  for (bool skip : {false, true}) {
    std::vector<float> p = p0, m = m0;
    float trust = 0.0f;
    cpu().lars_update(p.data(), g.data(), m.data(), n, 5.0f, 0.9f, 0.01f, 0.001f, 1e-9f, skip, &trust);
    DeviceBuffer<float> gp(p0), gg(g), gm(m0), gt(std::vector<float>(1, 0.0f));
    gpu().lars_update(gp.get(), gg.get(), gm.get(), n, 5.0f, 0.9f, 0.01f, 0.001f, 1e-9f, skip, gt.get());
    const float gtrust = gt.download()[0];
    const std::string what = skip ? "lars (skip)" : "lars";
    EXPECT_TRUE(scalar_close(what + " trust", gtrust, trust, 1e-6, 0.0));
    if (skip) {
      EXPECT_EQ(gtrust, 1.0f);
    }
    // No trust pointer: the same update (the ratio kept in the op's own scratch).
    DeviceBuffer<float> gp2(p0), gm2(m0);
    gpu().lars_update(gp2.get(), gg.get(), gm2.get(), n, 5.0f, 0.9f, 0.01f, 0.001f, 1e-9f, skip, nullptr);
    EXPECT_TRUE(same_bits(what + " p without a trust pointer", gp2.download(), gp.download()));
    EXPECT_TRUE(all_close(what + " p", gp.download(), p, kRel, kAbs));
    EXPECT_TRUE(all_close(what + " m", gm.download(), m, kRel, kAbs));
  }
}

TEST_P(OptimGpu, AdamMatchesCpu) {
  const size_t n = GetParam();
  const auto p0 = random_floats(n, 96), g = random_floats(n, 97), m0 = random_floats(n, 98, -0.1f, 0.1f);
  const auto v0 = random_floats(n, 99, 0.0f, 0.01f);
  const float b1 = 0.9f, b2 = 0.999f, bias1 = 1.0f - std::pow(b1, 3.0f), bias2 = 1.0f - std::pow(b2, 3.0f);
  std::vector<float> p = p0, m = m0, v = v0;
  cpu().adam_update(p.data(), g.data(), m.data(), v.data(), n, 0.01f, b1, b2, 1e-8f, bias1, bias2);
  DeviceBuffer<float> gp(p0), gg(g), gm(m0), gv(v0);
  gpu().adam_update(gp.get(), gg.get(), gm.get(), gv.get(), n, 0.01f, b1, b2, 1e-8f, bias1, bias2);
  EXPECT_TRUE(all_close("adam p", gp.download(), p, kRel, kAbs));
  EXPECT_TRUE(all_close("adam m", gm.download(), m, kRel, 1e-7));
  EXPECT_TRUE(all_close("adam v", gv.download(), v, kRel, 1e-9));
}

TEST_P(OptimGpu, LazyAdamLeavesZeroGradientsAloneAndMatchesCpu) {
  const size_t n = GetParam();
  const auto p0 = random_floats(n, 100), m0 = random_floats(n, 101, -0.1f, 0.1f);
  const auto v0 = random_floats(n, 102, 0.0f, 0.01f);
  // Zero gradients: whole blocks of 16 (untouched embedding rows), scattered zeros, and -0.
  auto g = random_floats(n, 103);
  for (size_t i = 0; i < n; ++i) {
    if ((i / 16) % 3 == 0) g[i] = 0.0f;
    else if (i % 5 == 0) g[i] = -0.0f;
  }
  const float b1 = 0.9f, b2 = 0.999f, bias1 = 1.0f - std::pow(b1, 7.0f), bias2 = 1.0f - std::pow(b2, 7.0f);
  std::vector<float> p = p0, m = m0, v = v0;
  cpu().lazy_adam_update(p.data(), g.data(), m.data(), v.data(), n, 0.01f, b1, b2, 1e-8f, bias1, bias2);
  DeviceBuffer<float> gp(p0), gg(g), gm(m0), gv(v0);
  gpu().lazy_adam_update(gp.get(), gg.get(), gm.get(), gv.get(), n, 0.01f, b1, b2, 1e-8f, bias1, bias2);
  const auto hp = gp.download(), hm = gm.download(), hv = gv.download();
  EXPECT_TRUE(all_close("lazy_adam p", hp, p, kRel, kAbs));
  EXPECT_TRUE(all_close("lazy_adam m", hm, m, kRel, 1e-7));
  EXPECT_TRUE(all_close("lazy_adam v", hv, v, kRel, 1e-9));
  // Where the gradient is zero, not a bit may change.
  std::vector<float> kept[3], orig[3];
  for (size_t i = 0; i < n; ++i)
    if (g[i] == 0.0f) {
      kept[0].push_back(hp[i]), kept[1].push_back(hm[i]), kept[2].push_back(hv[i]);
      orig[0].push_back(p0[i]), orig[1].push_back(m0[i]), orig[2].push_back(v0[i]);
    }
  EXPECT_TRUE(same_bits("lazy_adam p at zero gradients", kept[0], orig[0]));
  EXPECT_TRUE(same_bits("lazy_adam m at zero gradients", kept[1], orig[1]));
  EXPECT_TRUE(same_bits("lazy_adam v at zero gradients", kept[2], orig[2]));
}

INSTANTIATE_TEST_SUITE_P(Sizes, OptimGpu, ::testing::Values(size_t(1), size_t(1000), size_t(1000003)));

TEST_F(GpuTest, LarsTrustIsOneForZeroWeights) {
  const size_t n = 4099;
  const std::vector<float> p0(n, 0.0f);
  const auto g = random_floats(n, 104), m0 = random_floats(n, 105);
  std::vector<float> p = p0, m = m0;
  float trust = 0.0f;
  cpu().lars_update(p.data(), g.data(), m.data(), n, 0.1f, 0.9f, 0.01f, 0.001f, 0.0f, false, &trust);
  DeviceBuffer<float> gp(p0), gg(g), gm(m0), gt(std::vector<float>(1, 0.0f));
  gpu().lars_update(gp.get(), gg.get(), gm.get(), n, 0.1f, 0.9f, 0.01f, 0.001f, 0.0f, false, gt.get());
  const float gtrust = gt.download()[0];
  EXPECT_EQ(trust, 1.0f);
  EXPECT_EQ(gtrust, 1.0f);
  EXPECT_TRUE(all_close("lars p", gp.download(), p, kRel, kAbs));
  EXPECT_TRUE(all_close("lars m", gm.download(), m, kRel, kAbs));
}

class SumSquaresGpu : public GpuTestWithParam<size_t> {};

TEST_P(SumSquaresGpu, MatchesCpuInDoubleAndRerunsToTheSameBits) {
  const size_t n = GetParam();
  const auto x = random_floats(n, 106, -3.0f, 3.0f);
  double want = 0.0;
  cpu().sum_squares(x.data(), n, &want);
  DeviceBuffer<float> gx(x);
  DeviceLossSum sum;
  gpu().sum_squares(gx.get(), n, sum.get());
  const double got = sum.read();
  gpu().sum_squares(gx.get(), n, sum.get());  // added onto the first
  const double twice = sum.read();
  sum.zero();
  gpu().sum_squares(gx.get(), n, sum.get());
  const double again = sum.read();
  EXPECT_TRUE(scalar_close("sum_squares", got, want, 1e-10, 0.0));
  EXPECT_TRUE(same_bits("sum_squares (two runs)", std::vector<double>{got}, std::vector<double>{again}));
  EXPECT_TRUE(same_bits("sum_squares added twice", std::vector<double>{twice}, std::vector<double>{got + got}));
}

// Gradient clipping: the same ratio, worked out on the device from the device's sum of squares,
// scales the vector as the CPU's does (exactly: one float ratio times each element); a norm under
// the limit leaves it alone.
TEST_P(SumSquaresGpu, ClipByGlobalNormMatchesTheCpu) {
  const size_t n = GetParam();
  if (n == 0) return;  // nothing to scale (the empty sum is 0.0 above)
  const auto x = random_floats(n, 107, -3.0f, 3.0f);
  double sq = 0.0;
  cpu().sum_squares(x.data(), n, &sq);
  const double norm = std::sqrt(sq);
  for (const float max_norm : {static_cast<float>(norm / 3), static_cast<float>(norm * 2)}) {
    std::vector<float> want = x;
    double cpu_sq = 0.0;
    cpu().sum_squares(want.data(), n, &cpu_sq);
    cpu().clip_by_global_norm(want.data(), n, &cpu_sq, max_norm);
    DeviceBuffer<float> gx(x);
    DeviceLossSum gsq;
    gpu().sum_squares(gx.get(), n, gsq.get());
    gpu().clip_by_global_norm(gx.get(), n, gsq.get(), max_norm);
    EXPECT_TRUE(all_close(cat("clip_by_global_norm at ", max_norm), gx.download(), want, 1e-6, 0.0));
    if (max_norm > norm) EXPECT_EQ(want, x);
    else EXPECT_NE(want, x);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SumSquaresGpu,
                         ::testing::Values(size_t(0), size_t(1), size_t(1000), size_t(1000003),
                                           size_t(16777216 + 5)));

}  // namespace
