// The ncf kernels: embedding gather/scatter-add, GMF product, sigmoid BCE (finite differences),
// and the Adam / LazyAdam update kernels against a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

TEST(Embedding, GatherIsAdjointOfScatterAddWithRepeatedIndices) {
  const int rows = 5, dim = 3, n = 6, ld = 7;
  auto table = random_vec(rows * dim, 71);
  const std::vector<int32_t> idx{4, 0, 4, 2, 2, 4};
  std::vector<float> out(n * ld, -9.0f);
  embedding_gather(table.data(), dim, idx.data(), n, out.data(), ld);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < dim; ++j) EXPECT_EQ(out[i * ld + j], table[idx[i] * dim + j]);
    for (int j = dim; j < ld; ++j) EXPECT_EQ(out[i * ld + j], -9.0f) << "gather wrote outside its columns";
  }
  // Finite differences of loss = <gather(table), r> w.r.t. the table = scatter_add(r).
  auto r = random_vec(n * ld, 72);
  auto loss = [&] {
    embedding_gather(table.data(), dim, idx.data(), n, out.data(), ld);
    double s = 0;
    for (int i = 0; i < n; ++i) s += dot(out.data() + i * ld, r.data() + i * ld, dim);
    return s;
  };
  std::vector<float> dtable(rows * dim, 0.0f);
  embedding_scatter_add(dtable.data(), dim, idx.data(), n, r.data(), ld);
  expect_grad_close("dtable", loss, table.data(), table.size(), dtable.data(), 1e-2, 1e-3, 1e-4);
  for (int j = 0; j < dim; ++j) EXPECT_EQ(dtable[1 * dim + j], 0.0f) << "an untouched row got a gradient";
  for (int j = 0; j < dim; ++j) EXPECT_EQ(dtable[3 * dim + j], 0.0f);
}

TEST(Gmf, BackwardMatchesFiniteDifferences) {
  const int n = 4, dim = 5, lda = 6, ldb = 5, ldy = 8;
  auto a = random_vec(n * lda, 81), b = random_vec(n * ldb, 82), r = random_vec(n * ldy, 83);
  std::vector<float> y(n * ldy, 0.0f);
  auto loss = [&] {
    gmf_forward(a.data(), lda, b.data(), ldb, n, dim, y.data(), ldy);
    double s = 0;
    for (int i = 0; i < n; ++i) s += dot(y.data() + i * ldy, r.data() + i * ldy, dim);
    return s;
  };
  std::vector<float> da(n * dim), db(n * dim);
  gmf_backward(a.data(), lda, b.data(), ldb, r.data(), ldy, n, dim, da.data(), db.data());
  // Map the contiguous gradients onto the strided operands for the check.
  std::vector<float> da_full(n * lda, 0.0f), db_full(n * ldb, 0.0f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j) {
      da_full[i * lda + j] = da[i * dim + j];
      db_full[i * ldb + j] = db[i * dim + j];
    }
  expect_grad_close("da", loss, a.data(), a.size(), da_full.data(), 1e-2, 1e-3, 1e-4);
  expect_grad_close("db", loss, b.data(), b.size(), db_full.data(), 1e-2, 1e-3, 1e-4);
}

TEST(SigmoidBce, MatchesDefinitionAndFiniteDifferencesAndStaysFinite) {
  std::vector<float> z{-3.0f, -0.2f, 0.0f, 0.7f, 4.0f, 90.0f, -90.0f}, y{1, 0, 1, 1, 0, 1, 0};
  const int n = static_cast<int>(z.size());
  std::vector<float> d(n);
  double sum = 0.0;
  sigmoid_bce(z.data(), y.data(), n, 0.5f, d.data(), &sum);
  double ref = 0;
  for (int i = 0; i < n; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-double(z[i])));
    ref += y[i] ? -std::log(p) : -std::log1p(-p);
    EXPECT_NEAR(d[i], 0.5 * (p - y[i]), 1e-6) << i;
  }
  EXPECT_NEAR(sum, ref, 1e-5 * ref);
  EXPECT_TRUE(std::isfinite(sum));
  auto loss = [&] { return added_loss([&](double* l) { sigmoid_bce(z.data(), y.data(), n, 1.0f, nullptr, l); }); };
  std::vector<float> g(n);
  sigmoid_bce(z.data(), y.data(), n, 1.0f, g.data(), nullptr);
  // The op adds to its sum: a second call onto the same double gives twice the loss.
  double twice = 0.0;
  sigmoid_bce(z.data(), y.data(), n, 1.0f, nullptr, &twice);
  sigmoid_bce(z.data(), y.data(), n, 1.0f, nullptr, &twice);
  EXPECT_EQ(twice, sum + sum);
  expect_grad_close("dlogits", loss, z.data(), 5, g.data(), 1e-2, 1e-3, 1e-5);
}

// Double-precision Adam for `steps` steps on a fixed gradient sequence.
void adam_ref(std::vector<double>& p, const std::vector<std::vector<float>>& gs, double lr, double b1, double b2,
              double eps, bool lazy) {
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (size_t t = 1; t <= gs.size(); ++t) {
    const auto& g = gs[t - 1];
    for (size_t i = 0; i < p.size(); ++i) {
      if (lazy && g[i] == 0.0f) continue;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = m[i] / (1 - std::pow(b1, double(t))), vh = v[i] / (1 - std::pow(b2, double(t)));
      p[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
}

void run_adam(bool lazy) {
  const size_t n = 40;  // blocks of 16: one all-zero block, one partly zero, one partial block
  std::vector<std::vector<float>> gs;
  for (int t = 0; t < 5; ++t) {
    auto g = random_vec(n, 90 + t);
    for (size_t i = 0; i < 16; ++i) g[i] = 0.0f;             // an untouched embedding row
    if (t % 2) for (size_t i = 20; i < 24; ++i) g[i] = 0.0f;  // touched on some steps only
    gs.push_back(g);
  }
  auto p0 = random_vec(n, 99);
  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  for (size_t t = 1; t <= gs.size(); ++t) {
    const float c1 = float(1 - std::pow(double(b1), double(t))), c2 = float(1 - std::pow(double(b2), double(t)));
    if (lazy) lazy_adam_update(p.data(), gs[t - 1].data(), m.data(), v.data(), n, lr, b1, b2, eps, c1, c2);
    else adam_update(p.data(), gs[t - 1].data(), m.data(), v.data(), n, lr, b1, b2, eps, c1, c2);
  }
  std::vector<double> ref(p0.begin(), p0.end());
  adam_ref(ref, gs, lr, b1, b2, eps, lazy);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref[i], 1e-5) << (lazy ? "lazy " : "dense ") << i;
  if (lazy) {
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(p[i], p0[i]) << "lazy Adam moved an untouched element";
  }
}

TEST(Adam, DenseMatchesDoubleReference) { run_adam(false); }
TEST(Adam, LazyMatchesReferenceAndLeavesUntouchedElements) { run_adam(true); }

TEST(Adam, LazyAndDenseDifferOnlyWhereGradientsWereZero) {
  const size_t n = 32;
  auto g1 = random_vec(n, 111), g2 = random_vec(n, 112);
  for (size_t i = 0; i < 8; ++i) g2[i] = 0.0f;  // elements 0..7 untouched on step 2
  auto p = random_vec(n, 113);
  std::vector<float> pa = p, pl = p, ma(n, 0), va(n, 0), ml(n, 0), vl(n, 0);
  const float b1 = 0.9f, b2 = 0.999f;
  for (int t = 1; t <= 2; ++t) {
    const auto& g = t == 1 ? g1 : g2;
    const float c1 = 1 - std::pow(b1, float(t)), c2 = 1 - std::pow(b2, float(t));
    adam_update(pa.data(), g.data(), ma.data(), va.data(), n, 0.01f, b1, b2, 1e-8f, c1, c2);
    lazy_adam_update(pl.data(), g.data(), ml.data(), vl.data(), n, 0.01f, b1, b2, 1e-8f, c1, c2);
  }
  for (size_t i = 0; i < 8; ++i) EXPECT_NE(pa[i], pl[i]) << i;
  for (size_t i = 8; i < n; ++i) EXPECT_EQ(pa[i], pl[i]) << i;
}

}  // namespace
