// The transformer's kernels on the CPU: layer norm, fused multi-head attention, token embedding
// with sinusoidal positions, and dropout. Gradients against central differences
// (tests/kernels/grad_check.h); forward outputs against small cases worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/rng.h"
#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

// Central differences of loss() w.r.t. x[i] for the listed indices against analytic[i], with
// expect_grad_close's tolerance (for operands that are column blocks of wider buffers).
void expect_grad_close_at(const std::string& what, const std::function<double()>& loss, float* x,
                          const float* analytic, const std::vector<size_t>& at, double eps, double rtol, double atol) {
  for (size_t i : at) {
    const double num = central_difference(loss, x[i], float(eps));
    const double a = analytic[i];
    EXPECT_NEAR(a, num, rtol * std::max(std::fabs(a), std::fabs(num)) + atol) << what << " index " << i;
  }
}

// ================================ Layer norm ================================

struct LnCase {
  int64_t rows;
  int d;
  bool accumulate;
};

void PrintTo(const LnCase& c, std::ostream* os) {
  *os << "rows " << c.rows << " d " << c.d << (c.accumulate ? " accumulate" : "");
}

class LayerNormGrad : public ::testing::TestWithParam<LnCase> {};

TEST_P(LayerNormGrad, BackwardMatchesFiniteDifferences) {
  const LnCase p = GetParam();
  const size_t n = size_t(p.rows) * p.d;
  auto x = random_vec(n, 301, -2.0f, 2.0f), r = random_vec(n, 302);
  for (size_t i = 0; i < n; ++i) x[i] += float(i % 3);  // rows with a non-zero mean
  auto gamma = random_vec(p.d, 303, 0.5f, 1.5f), beta = random_vec(p.d, 304, -0.5f, 0.5f);
  std::vector<float> y(n), mean(p.rows), invstd(p.rows);
  auto loss = [&] {
    layernorm_forward(x.data(), p.rows, p.d, gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(), invstd.data());
    return dot(y.data(), r.data(), n);
  };
  loss();
  const float dx0 = p.accumulate ? 0.75f : 777.0f;  // added onto, or overwritten
  std::vector<float> dx(n, dx0), dgamma(p.d, 0.5f), dbeta(p.d, 0.25f);
  layernorm_backward(x.data(), r.data(), p.rows, p.d, gamma.data(), mean.data(), invstd.data(), dx.data(),
                     dgamma.data(), dbeta.data(), p.accumulate);
  if (p.accumulate)
    for (auto& g : dx) g -= dx0;
  for (int j = 0; j < p.d; ++j) {  // the initial 0.5 / 0.25 must have been accumulated onto
    dgamma[j] -= 0.5f;
    dbeta[j] -= 0.25f;
  }
  expect_grad_close("dx", loss, x.data(), n, dx.data(), 1e-3, 2e-2, 2e-3, 120);
  expect_grad_close("dgamma", loss, gamma.data(), p.d, dgamma.data(), 1e-3, 1e-2, 2e-3);
  expect_grad_close("dbeta", loss, beta.data(), p.d, dbeta.data(), 1e-3, 1e-2, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormGrad,
                         ::testing::Values(LnCase{5, 7, false},     // d below one lane group
                                           LnCase{3, 40, true},     // 2 lane groups + a tail, dx accumulated
                                           LnCase{70, 16, false},   // rows over a block of 64
                                           LnCase{2, 64, true}));

TEST(LayerNorm, ForwardNormalisesEachRowHandChecked) {
  // Row 0: 1, 2, 3, 4 (mean 2.5, biased variance 1.25); row 1: constant 4 (normalises to beta).
  const std::vector<float> x{1, 2, 3, 4, 4, 4, 4, 4}, gamma{1, 2, 1, 1}, beta{0, 0, 0.5f, -1};
  std::vector<float> y(8), mean(2), invstd(2);
  layernorm_forward(x.data(), 2, 4, gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(), invstd.data());
  const double is = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(mean[0], 2.5f, 1e-7);
  EXPECT_NEAR(invstd[0], is, 1e-6);
  EXPECT_NEAR(y[0], -1.5 * is, 1e-6);
  EXPECT_NEAR(y[1], 2.0 * -0.5 * is, 1e-6);
  EXPECT_NEAR(y[2], 0.5 * is + 0.5, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * is - 1.0, 1e-6);
  EXPECT_NEAR(mean[1], 4.0f, 1e-7);
  EXPECT_NEAR(invstd[1], 1.0 / std::sqrt(1e-5), 1e-2);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y[4 + j], beta[j], 1e-6) << j;
}

TEST(LayerNorm, LargeOffsetKeepsVarianceAccurate) {
  // x = 1000 + small values: E[x^2] - E[x]^2 in float would lose the variance; two passes keep it.
  const int d = 256;
  auto x = random_vec(d, 305, -1.0f, 1.0f);
  double m = 0, v = 0;
  for (auto& e : x) e += 1000.0f;
  for (float e : x) m += e;
  m /= d;
  for (float e : x) v += (e - m) * (e - m);
  v /= d;
  std::vector<float> gamma(d, 1.0f), beta(d, 0.0f), y(d), mean(1), invstd(1);
  layernorm_forward(x.data(), 1, d, gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(), invstd.data());
  EXPECT_NEAR(mean[0], m, 1e-4);
  EXPECT_NEAR(invstd[0], 1.0 / std::sqrt(v + 1e-5), 1e-3 / std::sqrt(v));
}

// ================================ Attention ================================

struct AttnCase {
  const char* name;
  int batch, heads, q_len, k_len, head_dim;
  bool causal;
  std::vector<int32_t> key_lengths;  // per batch row
  bool fused;                        // q, k, v column blocks of one [rows, 3*heads*head_dim + 3] buffer
};

void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

// The operands of one case, each row `ld` wide with sentinel columns beyond the heads' range.
struct AttnBuffers {
  int ldq, ldk, ldv, ldo;
  std::vector<float> qkv;  // fused: q, k, v side by side; else q, then k, then v (each its own ld)
  size_t qoff, koff, voff;
  explicit AttnBuffers(const AttnCase& c) {
    const int w = c.heads * c.head_dim;
    if (c.fused) {
      ldq = ldk = ldv = 3 * w + 3;
      qoff = 0;
      koff = size_t(w);
      voff = size_t(2 * w);
      qkv.assign(size_t(c.batch) * c.q_len * ldq, 0.0f);
    } else {
      ldq = w + 2;
      ldk = w + 1;
      ldv = w + 3;
      qoff = 0;
      koff = size_t(c.batch) * c.q_len * ldq;
      voff = koff + size_t(c.batch) * c.k_len * ldk;
      qkv.assign(voff + size_t(c.batch) * c.k_len * ldv, 0.0f);
    }
    ldo = w + 2;
  }
  float* q() { return qkv.data() + qoff; }
  float* k() { return qkv.data() + koff; }
  float* v() { return qkv.data() + voff; }
  // Indices into qkv of the heads' columns of q (rows q_len), k and v (rows k_len).
  std::vector<size_t> head_indices(const AttnCase& c) const {
    std::vector<size_t> at;
    const int w = c.heads * c.head_dim;
    auto add = [&](size_t base, int rows, int ld) {
      for (int b = 0; b < c.batch; ++b)
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < w; ++j) at.push_back(base + (size_t(b) * rows + i) * ld + j);
    };
    add(qoff, c.q_len, ldq);
    add(koff, c.k_len, ldk);
    add(voff, c.k_len, ldv);
    return at;
  }
};

class AttentionGrad : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionGrad, BackwardMatchesFiniteDifferences) {
  const AttnCase c = GetParam();
  const AttentionDims d{c.batch, c.heads, c.q_len, c.k_len, c.head_dim, c.causal};
  AttnBuffers in(c);
  {
    auto init = random_vec(in.qkv.size(), 311, -1.5f, 1.5f);
    in.qkv = init;
  }
  const auto heads = in.head_indices(c);
  const size_t out_size = size_t(c.batch) * c.q_len * in.ldo;
  auto r = random_vec(out_size, 312);
  std::vector<float> probs(size_t(c.batch) * c.heads * c.q_len * c.k_len), out(out_size, 777.0f);
  auto loss = [&] {
    attention_forward(d, in.q(), in.ldq, in.k(), in.ldk, in.v(), in.ldv, c.key_lengths.data(), probs.data(),
                      out.data(), in.ldo);
    return dot(out.data(), r.data(), out_size);
  };
  loss();
  // The output's sentinel columns are untouched; every probability row is a masked distribution.
  const int w = c.heads * c.head_dim;
  for (size_t row = 0; row < size_t(c.batch) * c.q_len; ++row)
    for (int j = w; j < in.ldo; ++j) EXPECT_EQ(out[row * in.ldo + j], 777.0f) << "forward wrote outside the heads";
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.q_len; ++i) {
        const float* pr = probs.data() + ((size_t(b) * c.heads + h) * c.q_len + i) * c.k_len;
        double sum = 0;
        int visible = 0;
        for (int j = 0; j < c.k_len; ++j) {
          const bool masked = j >= c.key_lengths[b] || (c.causal && j > i + (c.k_len - c.q_len));
          if (masked) {
            EXPECT_EQ(pr[j], 0.0f) << "masked key " << j << " of query " << i;
          } else {
            EXPECT_GT(pr[j], 0.0f) << "visible key " << j << " of query " << i;
          }
          visible += !masked;
          sum += pr[j];
        }
        EXPECT_NEAR(sum, visible ? 1.0 : 0.0, 1e-5) << "b " << b << " h " << h << " i " << i;
      }

  std::vector<float> dqkv(in.qkv.size(), 777.0f);
  float* dq = dqkv.data() + in.qoff;
  float* dk = dqkv.data() + in.koff;
  float* dv = dqkv.data() + in.voff;
  attention_backward(d, in.q(), in.ldq, in.k(), in.ldk, in.v(), in.ldv, probs.data(), r.data(), in.ldo, dq, dk, dv);
  // Inside the heads: overwritten (no sentinel left); outside: untouched.
  std::vector<char> in_head(dqkv.size(), 0);
  for (size_t i : heads) in_head[i] = 1;
  for (size_t i = 0; i < dqkv.size(); ++i) {
    if (in_head[i]) {
      EXPECT_NE(dqkv[i], 777.0f) << "gradient not written at " << i;
    } else {
      EXPECT_EQ(dqkv[i], 777.0f) << "backward wrote outside the heads at " << i;
    }
  }
  // Spread up to ~240 checks over q, k and v.
  std::vector<size_t> at;
  const size_t step = heads.size() <= 240 ? 1 : (heads.size() + 239) / 240;
  for (size_t i = 0; i < heads.size(); i += step) at.push_back(heads[i]);
  expect_grad_close_at("dq/dk/dv", loss, in.qkv.data(), dqkv.data(), at, 1e-3, 2e-2, 2e-3);
  // Padded keys get exactly zero gradients.
  for (int b = 0; b < c.batch; ++b)
    for (int j = c.key_lengths[b]; j < c.k_len; ++j)
      for (int col = 0; col < w; ++col) {
        EXPECT_EQ(dk[(size_t(b) * c.k_len + j) * in.ldk + col], 0.0f) << "padded key " << j;
        EXPECT_EQ(dv[(size_t(b) * c.k_len + j) * in.ldv + col], 0.0f) << "padded value " << j;
      }
}

std::string attn_name(const ::testing::TestParamInfo<AttnCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionGrad,
    ::testing::Values(AttnCase{"full", 1, 2, 3, 4, 8, false, {4}, false},
                      AttnCase{"padded", 2, 2, 4, 5, 8, false, {5, 3}, false},
                      AttnCase{"causal", 2, 2, 5, 5, 4, true, {5, 5}, false},
                      AttnCase{"causal_padded", 2, 1, 4, 4, 8, true, {4, 2}, false},
                      AttnCase{"causal_shorter_queries", 1, 2, 3, 6, 4, true, {6}, false},
                      AttnCase{"causal_shorter_queries_padded", 2, 1, 2, 5, 4, true, {5, 3}, false},
                      AttnCase{"fused_qkv_padded", 2, 2, 4, 4, 4, false, {4, 3}, true},
                      AttnCase{"fused_qkv_causal", 1, 3, 5, 5, 4, true, {5}, true}),
    attn_name);

TEST(Attention, OneKeyGivesItsValue) {
  const AttentionDims d{2, 2, 3, 1, 4, false};
  auto q = random_vec(2 * 3 * 8, 321), k = random_vec(2 * 1 * 8, 322), v = random_vec(2 * 1 * 8, 323);
  const std::vector<int32_t> lengths{1, 1};
  std::vector<float> probs(2 * 2 * 3 * 1), out(2 * 3 * 8);
  attention_forward(d, q.data(), 8, k.data(), 8, v.data(), 8, lengths.data(), probs.data(), out.data(), 8);
  for (float p : probs) EXPECT_EQ(p, 1.0f);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 8; ++j) EXPECT_FLOAT_EQ(out[(b * 3 + i) * 8 + j], v[b * 8 + j]) << b << " " << i << " " << j;
}

TEST(Attention, CausalFirstQuerySeesOnlyTheFirstValue) {
  const AttentionDims d{1, 2, 4, 4, 4, true};
  auto q = random_vec(4 * 8, 331), k = random_vec(4 * 8, 332), v = random_vec(4 * 8, 333);
  const std::vector<int32_t> lengths{4};
  std::vector<float> probs(2 * 4 * 4), out(4 * 8);
  attention_forward(d, q.data(), 8, k.data(), 8, v.data(), 8, lengths.data(), probs.data(), out.data(), 8);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(probs[h * 16 + 0], 1.0f);
    for (int j = 1; j < 4; ++j) EXPECT_EQ(probs[h * 16 + j], 0.0f);
    for (int i = 0; i < 4; ++i)  // query i sees keys 0..i
      for (int j = i + 1; j < 4; ++j) EXPECT_EQ(probs[h * 16 + i * 4 + j], 0.0f);
  }
  for (int j = 0; j < 8; ++j) EXPECT_FLOAT_EQ(out[j], v[j]);
}

TEST(Attention, EqualScoresAverageTheVisibleValues) {
  // q = 0: every visible key scores the same, so the output is the mean of the visible values.
  const AttentionDims d{2, 1, 2, 4, 3, false};
  std::vector<float> q(2 * 2 * 3, 0.0f);
  auto k = random_vec(2 * 4 * 3, 341), v = random_vec(2 * 4 * 3, 342);
  const std::vector<int32_t> lengths{4, 2};
  std::vector<float> probs(2 * 2 * 4), out(2 * 2 * 3);
  attention_forward(d, q.data(), 3, k.data(), 3, v.data(), 3, lengths.data(), probs.data(), out.data(), 3);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i)
      for (int c = 0; c < 3; ++c) {
        double m = 0;
        for (int j = 0; j < lengths[b]; ++j) m += v[(b * 4 + j) * 3 + c];
        m /= lengths[b];
        EXPECT_NEAR(out[(b * 2 + i) * 3 + c], m, 1e-6) << b << " " << i << " " << c;
        for (int j = 0; j < 4; ++j)
          EXPECT_NEAR(probs[(b * 2 + i) * 4 + j], j < lengths[b] ? 1.0 / lengths[b] : 0.0, 1e-7);
      }
}

TEST(Attention, KnownScoresGiveKnownSoftmax) {
  // One head of dim 4 (scale 1/2): q = (2, 0, 0, 0), keys (1,0,0,0) and (0,0,0,0) -> scores 1 and 0.
  const AttentionDims d{1, 1, 1, 2, 4, false};
  const std::vector<float> q{2, 0, 0, 0}, k{1, 0, 0, 0, 0, 0, 0, 0}, v{1, 2, 3, 4, -1, 0, 1, 0};
  const std::vector<int32_t> lengths{2};
  std::vector<float> probs(2), out(4);
  attention_forward(d, q.data(), 4, k.data(), 4, v.data(), 4, lengths.data(), probs.data(), out.data(), 4);
  const double p0 = std::exp(1.0) / (std::exp(1.0) + 1.0);
  EXPECT_NEAR(probs[0], p0, 1e-6);
  EXPECT_NEAR(probs[1], 1.0 - p0, 1e-6);
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(out[c], p0 * v[c] + (1.0 - p0) * v[4 + c], 1e-6);
}

TEST(Attention, EveryKeyMaskedGivesZeroOutputAndGradients) {
  // Batch row 1 has no keys; with causal and q_len > k_len, row 0's first query sees none either.
  const AttentionDims d{2, 1, 3, 2, 4, true};
  auto q = random_vec(2 * 3 * 4, 351), k = random_vec(2 * 2 * 4, 352), v = random_vec(2 * 2 * 4, 353);
  auto dout = random_vec(2 * 3 * 4, 354);
  const std::vector<int32_t> lengths{2, 0};
  std::vector<float> probs(2 * 3 * 2, 5.0f), out(2 * 3 * 4, 5.0f);
  attention_forward(d, q.data(), 4, k.data(), 4, v.data(), 4, lengths.data(), probs.data(), out.data(), 4);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(out[c], 0.0f) << "row 0 query 0: key 0 is after position -1";
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_EQ(probs[1], 0.0f);
  EXPECT_EQ(probs[2], 1.0f);  // query 1 sits at key position 0
  for (int i = 12; i < 24; ++i) EXPECT_EQ(out[i], 0.0f);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(probs[i], 0.0f);
  std::vector<float> dq(q.size(), 5.0f), dk(k.size(), 5.0f), dv(v.size(), 5.0f);
  attention_backward(d, q.data(), 4, k.data(), 4, v.data(), 4, probs.data(), dout.data(), 4, dq.data(), dk.data(),
                     dv.data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dq[i], 0.0f);
  for (int i = 12; i < 24; ++i) EXPECT_EQ(dq[i], 0.0f);
  for (int i = 8; i < 16; ++i) {
    EXPECT_EQ(dk[i], 0.0f);
    EXPECT_EQ(dv[i], 0.0f);
  }
}

// The beam search's cross-attention reads each sentence's one set of keys: for each place j in the
// beam, the sentence's j-th hypothesis is a query (rows b * beam + j, a strided view). That must
// give each query's bits as a batch row of its own over a copy of the keys, as the decoder
// computed it before. (One call with q_len = beam would not: the CPU's GEMMs then sum another way.)
TEST(Attention, BeamRowsOverSharedKeysGiveTheBitsOfEachAlone) {
  const int sentences = 3, beam = 4, heads = 4, hd = 64, d = heads * hd, keys = 61;
  const std::vector<int32_t> lengths{61, 37, 5};
  auto q = random_vec(size_t(sentences) * beam * d, 361), kv = random_vec(size_t(sentences) * keys * 2 * d, 362);
  std::vector<float> kv_rows(size_t(sentences) * beam * keys * 2 * d);
  std::vector<int32_t> row_lengths;
  for (int b = 0; b < sentences; ++b)
    for (int j = 0; j < beam; ++j) {
      std::copy_n(kv.begin() + size_t(b) * keys * 2 * d, size_t(keys) * 2 * d,
                  kv_rows.begin() + (size_t(b) * beam + j) * keys * 2 * d);
      row_lengths.push_back(lengths[size_t(b)]);
    }
  const size_t probs_size = size_t(sentences) * beam * heads * keys;
  std::vector<float> shared_probs(probs_size), shared_out(q.size()), alone_probs(probs_size), alone_out(q.size());
  const AttentionDims per_place{sentences, heads, 1, keys, hd, false};
  for (int j = 0; j < beam; ++j)
    attention_forward(per_place, q.data() + size_t(j) * d, beam * d, kv.data(), 2 * d, kv.data() + d, 2 * d,
                      lengths.data(), shared_probs.data() + size_t(j) * sentences * heads * keys,
                      shared_out.data() + size_t(j) * d, beam * d);
  attention_forward(AttentionDims{sentences * beam, heads, 1, keys, hd, false}, q.data(), d, kv_rows.data(), 2 * d,
                    kv_rows.data() + d, 2 * d, row_lengths.data(), alone_probs.data(), alone_out.data(), d);
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(f32_bits(shared_out[i]), f32_bits(alone_out[i])) << "out " << i;
  // probs: [place][sentence][head][key] against [row][head][key].
  for (int b = 0; b < sentences; ++b)
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < beam; ++j)
        for (int k = 0; k < keys; ++k)
          ASSERT_EQ(f32_bits(shared_probs[((size_t(j) * sentences + b) * heads + h) * keys + k]),
                    f32_bits(alone_probs[((size_t(b) * beam + j) * heads + h) * keys + k]))
              << b << " " << h << " " << j << " " << k;
}

// The decoder's self-attention cache under bf16 storage: keys and values kept as bf16 bits, in the
// cache's layout (one row [k | v] of 2 d per position, rows per hypothesis), read by
// attention_forward_bf16_kv. Its probabilities and outputs must be the bits of attention_forward
// on the widened cache, in the same layout, for every key length (0 included) and causal or not.
TEST(Attention, Bf16KeysAndValuesGiveTheBitsOfTheirWidenedValues) {
  const int rows = 5, heads = 4, hd = 16, d = heads * hd, keys = 23;
  const std::vector<int32_t> lengths{23, 1, 0, 17, 9};
  for (const int q_len : {1, 3})
    for (const bool causal : {false, true}) {
      const auto q = random_vec(size_t(rows) * q_len * d, 371);
      const auto kv = random_vec(size_t(rows) * keys * 2 * d, 372, -4.0f, 4.0f);
      std::vector<uint16_t> kv16(kv.size());
      std::vector<float> widened(kv.size());
      for (size_t i = 0; i < kv.size(); ++i) {
        kv16[i] = f32_to_bf16(kv[i]);
        widened[i] = bf16_to_f32(kv16[i]);
      }
      const AttentionDims dims{rows, heads, q_len, keys, hd, causal};
      const size_t probs_size = size_t(rows) * heads * q_len * keys;
      std::vector<float> want_probs(probs_size, -1.0f), want_out(q.size(), -1.0f);
      std::vector<float> got_probs(probs_size, -2.0f), got_out(q.size(), -2.0f);
      attention_forward(dims, q.data(), d, widened.data(), 2 * d, widened.data() + d, 2 * d, lengths.data(),
                        want_probs.data(), want_out.data(), d);
      attention_forward_bf16_kv(dims, q.data(), d, kv16.data(), 2 * d, kv16.data() + d, 2 * d, lengths.data(),
                                got_probs.data(), got_out.data(), d);
      for (size_t i = 0; i < probs_size; ++i)
        ASSERT_EQ(f32_bits(got_probs[i]), f32_bits(want_probs[i])) << "probs " << i << " q_len " << q_len;
      for (size_t i = 0; i < q.size(); ++i)
        ASSERT_EQ(f32_bits(got_out[i]), f32_bits(want_out[i])) << "out " << i << " q_len " << q_len;
      // Not the fp32 keys' result: the test sees the rounding (so a path that read kv would fail).
      std::vector<float> fp32_out(q.size());
      attention_forward(dims, q.data(), d, kv.data(), 2 * d, kv.data() + d, 2 * d, lengths.data(),
                        want_probs.data(), fp32_out.data(), d);
      EXPECT_NE(fp32_out, got_out);
    }
}

// ================================ Token embedding ================================

// fairseq's PE written independently: w_i = 10000^(-i / (half - 1)).
double reference_pe(int pos, int dim, int col) {
  const int half = dim / 2;
  const int i = col < half ? col : col - half;
  const double angle = pos * std::pow(10000.0, -double(i) / double(half - 1));
  return col < half ? std::sin(angle) : std::cos(angle);
}

TEST(TokenEmbedding, PositionEncodingHandChecked) {
  const int dim = 8, len = 4, batch = 2;
  std::vector<float> table(3 * dim, 0.0f), out(batch * len * dim);
  const std::vector<int32_t> tokens{0, 1, 2, 0, 2, 2, 1, 0};
  token_embedding_forward(table.data(), dim, tokens.data(), batch, len, 1.0f, 0, true, out.data());
  for (int b = 0; b < batch; ++b) {
    const float* p0 = out.data() + size_t(b) * len * dim;  // position 0: sin 0 = 0, cos 0 = 1
    for (int j = 0; j < 4; ++j) EXPECT_EQ(p0[j], 0.0f);
    for (int j = 4; j < 8; ++j) EXPECT_EQ(p0[j], 1.0f);
    const float* p3 = out.data() + (size_t(b) * len + 3) * dim;  // position 3, w_0 = 1, w_3 = 1e-4
    EXPECT_NEAR(p3[0], 0.14112000806, 1e-7);                    // sin 3
    EXPECT_NEAR(p3[4], -0.98999249660, 1e-7);                   // cos 3
    EXPECT_NEAR(p3[3], 3e-4, 1e-9);                             // sin(3e-4)
    EXPECT_NEAR(p3[7], 1.0 - 4.5e-8, 1e-7);                     // cos(3e-4)
    for (int t = 0; t < len; ++t)
      for (int j = 0; j < dim; ++j)
        EXPECT_NEAR(out[(size_t(b) * len + t) * dim + j], reference_pe(t, dim, j), 2e-7) << t << " " << j;
  }
}

TEST(TokenEmbedding, ForwardIsScaledRowPlusOffsetPositions) {
  const int dim = 6, len = 3, batch = 2, vocab = 5, pos_offset = 7;
  auto table = random_vec(vocab * dim, 361);
  const std::vector<int32_t> tokens{4, 0, 4, 1, 1, 3};
  std::vector<float> out(batch * len * dim), plain(batch * len * dim);
  const float scale = std::sqrt(float(dim));
  token_embedding_forward(table.data(), dim, tokens.data(), batch, len, scale, pos_offset, true, out.data());
  token_embedding_forward(table.data(), dim, tokens.data(), batch, len, scale, pos_offset, false, plain.data());
  for (int r = 0; r < batch * len; ++r)
    for (int j = 0; j < dim; ++j) {
      const double row = double(scale) * table[tokens[r] * dim + j];
      EXPECT_NEAR(plain[r * dim + j], row, 1e-6);
      EXPECT_NEAR(out[r * dim + j], row + reference_pe(pos_offset + r % len, dim, j), 2e-6) << r << " " << j;
    }
}

TEST(TokenEmbedding, BackwardMatchesFiniteDifferencesWithRepeatedTokens) {
  const int dim = 5, len = 4, batch = 2, vocab = 6;
  auto table = random_vec(vocab * dim, 371);
  const std::vector<int32_t> tokens{2, 2, 0, 5, 5, 2, 3, 2};  // rows 1 and 4 unused
  auto r = random_vec(batch * len * dim, 372);
  std::vector<float> out(batch * len * dim);
  const float scale = 2.5f;
  auto loss = [&] {
    token_embedding_forward(table.data(), dim, tokens.data(), batch, len, scale, 1, true, out.data());
    return dot(out.data(), r.data(), out.size());
  };
  std::vector<float> dtable(vocab * dim, 0.5f);
  token_embedding_backward(dtable.data(), dim, tokens.data(), batch * len, scale, r.data());
  for (auto& g : dtable) g -= 0.5f;  // accumulated onto the initial 0.5
  expect_grad_close("dtable", loss, table.data(), table.size(), dtable.data(), 1e-2, 1e-3, 1e-4);
  for (int j = 0; j < dim; ++j) {
    EXPECT_EQ(dtable[1 * dim + j], 0.0f) << "an unused row got a gradient";
    EXPECT_EQ(dtable[4 * dim + j], 0.0f);
  }
  // Row 2 occurs 4 times: the sum of its rows of dout, in order.
  for (int j = 0; j < dim; ++j) {
    float want = 0.5f;
    for (int q : {0, 1, 5, 7}) want += scale * r[q * dim + j];
    EXPECT_NEAR(dtable[2 * dim + j] + 0.5f, want, 1e-6);
  }
}

// ================================ Dropout ================================

TEST(Dropout, MaskFractionIsAboutPAndKeptValuesAreScaled) {
  const size_t n = 200000;
  auto x = random_vec(n, 381);
  for (float p : {0.1f, 0.3f, 0.5f, 0.9f}) {
    std::vector<float> y(n);
    std::vector<uint8_t> mask(n, 7);
    dropout_forward(x.data(), n, p, 42, 1000, y.data(), mask.data());
    size_t dropped = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(mask[i] == 0 || mask[i] == 1) << "mask must be 0 or 1";
      if (mask[i]) {
        EXPECT_NEAR(y[i], x[i] / (1.0f - p), 1e-6f * std::fabs(x[i] / (1.0f - p))) << i;
      } else {
        ++dropped;
        EXPECT_EQ(y[i], 0.0f);
      }
    }
    const double frac = double(dropped) / double(n), sigma = std::sqrt(p * (1.0 - p) / double(n));
    EXPECT_NEAR(frac, p, 5 * sigma) << "p " << p;
  }
}

TEST(Dropout, MaskIsRngUniformOfSeedAndOffset) {
  const size_t n = 5000;
  const float p = 0.4f;
  auto x = random_vec(n + 300, 391);
  std::vector<float> y(n + 300), y2(n);
  std::vector<uint8_t> m(n + 300), m2(n), m3(n);
  dropout_forward(x.data(), n + 300, p, 7, 100, y.data(), m.data());
  for (size_t i = 0; i < n + 300; ++i)
    ASSERT_EQ(m[i], rng_uniform(7, kDropoutStream, 100 + i) >= p ? 1 : 0) << "element " << i;
  // The same (seed, offset + i) gives the same element whatever the call's start.
  dropout_forward(x.data() + 300, n, p, 7, 400, y2.data(), m2.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(m2[i], m[300 + i]) << i;
    ASSERT_EQ(y2[i], y[300 + i]) << i;
  }
  // Another seed, or another offset, gives another mask.
  dropout_forward(x.data(), n, p, 8, 100, y2.data(), m3.data());
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += m3[i] != m[i];
  EXPECT_GT(differ, n / 4);
  dropout_forward(x.data(), n, p, 7, 101, y2.data(), m3.data());
  differ = 0;
  for (size_t i = 0; i < n; ++i) differ += m3[i] != m[i];
  EXPECT_GT(differ, n / 4);
}

TEST(Dropout, BackwardIsMaskTimesGradOverKeepProbability) {
  const size_t n = 1000;
  const float p = 0.25f;
  auto x = random_vec(n, 401), dy = random_vec(n, 402);
  std::vector<float> y(n), dx(n, 9.0f);
  std::vector<uint8_t> mask(n);
  dropout_forward(x.data(), n, p, 3, 0, y.data(), mask.data());
  dropout_backward(dy.data(), mask.data(), n, p, dx.data());
  for (size_t i = 0; i < n; ++i)
    EXPECT_NEAR(dx[i], mask[i] ? dy[i] / (1.0f - p) : 0.0f, 1e-6f) << i;
  // dx may alias dy.
  auto alias = dy;
  dropout_backward(alias.data(), mask.data(), n, p, alias.data());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(alias[i], dx[i]) << i;
  // Finite differences: with the mask fixed by (seed, offset), backward is forward's adjoint.
  auto loss = [&] {
    dropout_forward(x.data(), n, p, 3, 0, y.data(), mask.data());
    return dot(y.data(), dy.data(), n);
  };
  expect_grad_close("dx", loss, x.data(), n, dx.data(), 1e-2, 1e-3, 1e-4);
}

TEST(Dropout, ZeroProbabilityCopiesExactly) {
  const size_t n = 777;
  auto x = random_vec(n, 411), dy = random_vec(n, 412);
  std::vector<float> y(n, 5.0f), dx(n, 5.0f);
  std::vector<uint8_t> mask(n, 0);
  dropout_forward(x.data(), n, 0.0f, 99, 12345, y.data(), mask.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], x[i]) << i;
    ASSERT_EQ(mask[i], 1) << i;
  }
  dropout_backward(dy.data(), mask.data(), n, 0.0f, dx.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(dx[i], dy[i]) << i;
}

}  // namespace
