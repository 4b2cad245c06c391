// The CUDA transformer ops against the CPU ones, through the op tables: dropout (masks equal bit
// for bit, outputs exact), token embedding (forward close, backward close and rerunning to the same
// bits), layer norm (outputs, saved statistics and gradients), fused attention (probabilities,
// outputs and gradients, with padding, causal masks, shorter queries, a batch row with no keys and
// q/k/v as column blocks of one fused buffer whose other columns must stay untouched), and the
// existing scale_inplace.
// Tolerances (fp32, |got - want| <= abs + rel*|want|): dropout and scale_inplace exact (one
// rounding per element on both devices); token embedding 1e-6 + 1e-6*|want| (sines in double on
// both, maybe a fused multiply-add); layer norm 1e-5 + 1e-5*|want| for y and the statistics,
// 1e-4 + 1e-4*|want| for the gradients (sums in another order); attention 1e-5 + 1e-5*|want|
// forward, 1e-4 + 1e-4*|want| backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

// ---- scale_inplace ----
class ScaleInplaceGpu : public GpuTestWithParam<size_t> {};

TEST_P(ScaleInplaceGpu, MatchesCpuExactly) {
  const size_t n = GetParam();
  auto x = random_floats(n, 500, -3.0f, 3.0f);
  DeviceBuffer<float> gx(x);
  for (float alpha : {0.5f, 0.37f, -2.0f, 0.0f}) {
    cpu().scale_inplace(x.data(), n, alpha);
    gpu().scale_inplace(gx.get(), n, alpha);
    EXPECT_TRUE(all_equal(cat("scale_inplace alpha ", alpha), gx.download(), x));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ScaleInplaceGpu, ::testing::Values(size_t(1), size_t(1000), size_t(1) << 20));

// ---- Dropout ----
struct DropCase {
  size_t n;
  float p;
  uint64_t offset;
};

std::string drop_name(const ::testing::TestParamInfo<DropCase>& info) {
  return cat("n", info.param.n, "_p", int(info.param.p * 100), "_offset", info.param.offset);
}

class DropoutGpu : public GpuTestWithParam<DropCase> {};

TEST_P(DropoutGpu, MaskIsTheCpuBitsAndOutputsAreExact) {
  const DropCase c = GetParam();
  const auto x = random_floats(c.n, 501), dy = random_floats(c.n, 502);
  std::vector<float> y(c.n), dx(c.n);
  std::vector<uint8_t> mask(c.n);
  cpu().dropout_forward(x.data(), c.n, c.p, 1234, c.offset, y.data(), mask.data());
  cpu().dropout_backward(dy.data(), mask.data(), c.n, c.p, dx.data());

  DeviceBuffer<float> gx(x), gy(std::vector<float>(c.n, 777.0f)), gdy(dy), gdx(c.n);
  DeviceBuffer<uint8_t> gmask(std::vector<uint8_t>(c.n, 7));
  gpu().dropout_forward(gx.get(), c.n, c.p, 1234, c.offset, gy.get(), gmask.get());
  EXPECT_TRUE(same_bits("dropout mask", gmask.download(), mask));
  EXPECT_TRUE(all_equal("dropout y", gy.download(), y));
  gpu().dropout_backward(gdy.get(), gmask.get(), c.n, c.p, gdx.get());
  EXPECT_TRUE(all_equal("dropout dx", gdx.download(), dx));
  gpu().dropout_backward(gdy.get(), gmask.get(), c.n, c.p, gdy.get());  // dx aliases dy
  EXPECT_TRUE(all_equal("dropout dx aliasing dy", gdy.download(), dx));
  // Another seed draws another mask (the control; at p = 1 every mask is all zeros).
  if (c.p > 0.0f && c.p < 1.0f && c.n >= 1000) {
    gpu().dropout_forward(gx.get(), c.n, c.p, 1235, c.offset, gy.get(), gmask.get());
    EXPECT_FALSE(same_bits("dropout mask of another seed", gmask.download(), mask));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, DropoutGpu,
                         ::testing::Values(DropCase{1, 0.5f, 0}, DropCase{1000, 0.1f, 0},
                                           DropCase{12345, 0.3f, 77777}, DropCase{size_t(1) << 21, 0.1f, 1ull << 40},
                                           DropCase{5000, 0.0f, 3}, DropCase{4096, 1.0f, 0}),
                         drop_name);

// ---- Token embedding ----
struct TeCase {
  int vocab, dim, batch, len, pos_offset;
  bool add_positions;
};

std::string te_name(const ::testing::TestParamInfo<TeCase>& info) {
  const TeCase& c = info.param;
  return cat("v", c.vocab, "_d", c.dim, "_b", c.batch, "_l", c.len, "_pos", c.pos_offset,
             c.add_positions ? "" : "_nopos");
}

class TokenEmbeddingGpu : public GpuTestWithParam<TeCase> {};

TEST_P(TokenEmbeddingGpu, ForwardMatchesCpu) {
  const TeCase c = GetParam();
  const auto table = random_floats(size_t(c.vocab) * c.dim, 510);
  const auto tokens = random_indices(size_t(c.batch) * c.len, 511, c.vocab);
  const float scale = std::sqrt(float(c.dim));
  std::vector<float> out(size_t(c.batch) * c.len * c.dim);
  cpu().token_embedding_forward(table.data(), c.dim, tokens.data(), c.batch, c.len, scale, c.pos_offset,
                                c.add_positions, out.data());
  DeviceBuffer<float> gtable(table), gout(std::vector<float>(out.size(), 777.0f));
  DeviceBuffer<int32_t> gtokens(tokens);
  gpu().token_embedding_forward(gtable.get(), c.dim, gtokens.get(), c.batch, c.len, scale, c.pos_offset,
                                c.add_positions, gout.get());
  EXPECT_TRUE(all_close("token_embedding_forward out", gout.download(), out, 1e-6, 1e-6));
}

TEST_P(TokenEmbeddingGpu, BackwardMatchesCpuAndRerunsToTheSameBits) {
  const TeCase c = GetParam();
  const int n = c.batch * c.len;
  // Few distinct tokens: long runs of repeated rows.
  const auto tokens = random_indices(size_t(n), 512, std::min(c.vocab, 7));
  const auto dout = random_floats(size_t(n) * c.dim, 513);
  const auto dtable0 = random_floats(size_t(c.vocab) * c.dim, 514);  // accumulated onto
  const float scale = 3.0f;
  std::vector<float> dtable = dtable0;
  cpu().token_embedding_backward(dtable.data(), c.dim, tokens.data(), n, scale, dout.data());
  DeviceBuffer<int32_t> gtokens(tokens);
  DeviceBuffer<float> gdout(dout);
  std::vector<float> runs[2];
  for (auto& r : runs) {
    DeviceBuffer<float> gdtable(dtable0);
    gpu().token_embedding_backward(gdtable.get(), c.dim, gtokens.get(), n, scale, gdout.get());
    r = gdtable.download();
  }
  EXPECT_TRUE(all_close("token_embedding_backward dtable", runs[0], dtable, 1e-5, 1e-5));
  EXPECT_TRUE(same_bits("token_embedding_backward dtable", runs[0], runs[1]));
}

INSTANTIATE_TEST_SUITE_P(Cases, TokenEmbeddingGpu,
                         ::testing::Values(TeCase{11, 8, 2, 5, 0, true}, TeCase{100, 512, 8, 37, 2, true},
                                           TeCase{3000, 1024, 16, 64, 1, true}, TeCase{50, 6, 3, 4, 0, false},
                                           TeCase{20, 7, 2, 3, 5, true}),
                         te_name);

// ---- Layer norm ----
struct LnCase {
  int64_t rows;
  int d;
};

std::string ln_name(const ::testing::TestParamInfo<LnCase>& info) {
  return cat("rows", info.param.rows, "_d", info.param.d);
}

class LayerNormGpu : public GpuTestWithParam<LnCase> {};

TEST_P(LayerNormGpu, ForwardAndBackwardMatchCpu) {
  const LnCase c = GetParam();
  const size_t n = size_t(c.rows) * c.d;
  auto x = random_floats(n, 520, -2.0f, 2.0f);
  for (size_t i = 0; i < n; ++i) x[i] += float((i / size_t(c.d)) % 5);  // rows with different means
  const auto gamma = random_floats(c.d, 521, 0.5f, 1.5f), beta = random_floats(c.d, 522);
  const auto dy = random_floats(n, 523), dx0 = random_floats(n, 524);
  const auto dgamma0 = random_floats(c.d, 525), dbeta0 = random_floats(c.d, 526);
  std::vector<float> y(n), mean(c.rows), invstd(c.rows);
  cpu().layernorm_forward(x.data(), c.rows, c.d, gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(),
                          invstd.data());
  DeviceBuffer<float> gx(x), gg(gamma), gb(beta), gy(std::vector<float>(n, 777.0f)), gmean(c.rows),
      ginvstd(c.rows);
  gpu().layernorm_forward(gx.get(), c.rows, c.d, gg.get(), gb.get(), 1e-5f, gy.get(), gmean.get(), ginvstd.get());
  EXPECT_TRUE(all_close("layernorm y", gy.download(), y, 1e-5, 1e-5));
  EXPECT_TRUE(all_close("layernorm save_mean", gmean.download(), mean, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("layernorm save_invstd", ginvstd.download(), invstd, 1e-5, 1e-6));

  // Backward from the CPU's saved statistics, dx overwritten and accumulated.
  DeviceBuffer<float> cmean(mean), cinvstd(invstd), gdy(dy);
  for (bool accumulate : {false, true}) {
    std::vector<float> dx = dx0, dgamma = dgamma0, dbeta = dbeta0;
    cpu().layernorm_backward(x.data(), dy.data(), c.rows, c.d, gamma.data(), mean.data(), invstd.data(), dx.data(),
                             dgamma.data(), dbeta.data(), accumulate);
    DeviceBuffer<float> gdx(dx0), gdgamma(dgamma0), gdbeta(dbeta0);
    gpu().layernorm_backward(gx.get(), gdy.get(), c.rows, c.d, gg.get(), cmean.get(), cinvstd.get(), gdx.get(),
                             gdgamma.get(), gdbeta.get(), accumulate);
    const std::string tag = accumulate ? " (accumulate)" : "";
    EXPECT_TRUE(all_close("layernorm_backward dx" + tag, gdx.download(), dx, 1e-4, 1e-4));
    EXPECT_TRUE(all_close("layernorm_backward dgamma" + tag, gdgamma.download(), dgamma, 1e-4, 1e-4));
    EXPECT_TRUE(all_close("layernorm_backward dbeta" + tag, gdbeta.download(), dbeta, 1e-4, 1e-4));
  }
}

TEST_P(LayerNormGpu, BackwardRerunsToTheSameBits) {
  const LnCase c = GetParam();
  const size_t n = size_t(c.rows) * c.d;
  DeviceBuffer<float> gx(random_floats(n, 530)), gg(random_floats(c.d, 531)), gb(random_floats(c.d, 532)),
      gdy(random_floats(n, 533)), gy(n), gmean(c.rows), ginvstd(c.rows);
  gpu().layernorm_forward(gx.get(), c.rows, c.d, gg.get(), gb.get(), 1e-5f, gy.get(), gmean.get(), ginvstd.get());
  std::vector<float> runs[2][3];
  for (auto& r : runs) {
    DeviceBuffer<float> dx(n), dgamma(c.d), dbeta(c.d);
    gpu().layernorm_backward(gx.get(), gdy.get(), c.rows, c.d, gg.get(), gmean.get(), ginvstd.get(), dx.get(),
                             dgamma.get(), dbeta.get(), false);
    r[0] = dx.download();
    r[1] = dgamma.download();
    r[2] = dbeta.download();
  }
  EXPECT_TRUE(same_bits("layernorm dx", runs[0][0], runs[1][0]));
  EXPECT_TRUE(same_bits("layernorm dgamma", runs[0][1], runs[1][1]));
  EXPECT_TRUE(same_bits("layernorm dbeta", runs[0][2], runs[1][2]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormGpu,
                         ::testing::Values(LnCase{1, 7}, LnCase{5, 40}, LnCase{100, 512}, LnCase{4096, 1024},
                                           LnCase{3000, 33}),
                         ln_name);

// ---- Attention ----
struct AttnCase {
  const char* name;
  int batch, heads, q_len, k_len, head_dim;
  bool causal, fused;                // fused: q, k, v column blocks of one buffer (q_len == k_len)
  std::vector<int32_t> key_lengths;  // per batch row
};

std::string attn_name(const ::testing::TestParamInfo<AttnCase>& info) { return info.param.name; }
void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

// Host operands: one buffer holding q, k and v (fused side by side, else one after the other),
// every row wider than the heads' columns, so that writes outside them show.
struct AttnLayout {
  int ldq, ldk, ldv, ldo;
  size_t qoff, koff, voff, size, out_size, probs_size;
  explicit AttnLayout(const AttnCase& c) {
    const int w = c.heads * c.head_dim;
    if (c.fused) {
      ldq = ldk = ldv = 3 * w + 5;
      qoff = 0;
      koff = size_t(w);
      voff = size_t(2 * w);
      size = size_t(c.batch) * c.q_len * ldq;
    } else {
      ldq = w + 3;
      ldk = w + 1;
      ldv = w + 2;
      qoff = 0;
      koff = size_t(c.batch) * c.q_len * ldq;
      voff = koff + size_t(c.batch) * c.k_len * ldk;
      size = voff + size_t(c.batch) * c.k_len * ldv;
    }
    ldo = w + 4;
    out_size = size_t(c.batch) * c.q_len * ldo;
    probs_size = size_t(c.batch) * c.heads * c.q_len * c.k_len;
  }
};

class AttentionGpu : public GpuTestWithParam<AttnCase> {};

TEST_P(AttentionGpu, ForwardAndBackwardMatchCpu) {
  const AttnCase c = GetParam();
  const AttentionDims d{c.batch, c.heads, c.q_len, c.k_len, c.head_dim, c.causal};
  const AttnLayout l(c);
  const auto qkv = random_floats(l.size, 540, -2.0f, 2.0f);
  const auto dout = random_floats(l.out_size, 541);
  std::vector<float> probs(l.probs_size), out(l.out_size, 777.0f), dqkv(l.size, 777.0f);
  cpu().attention_forward(d, qkv.data() + l.qoff, l.ldq, qkv.data() + l.koff, l.ldk, qkv.data() + l.voff, l.ldv,
                          c.key_lengths.data(), probs.data(), out.data(), l.ldo);
  cpu().attention_backward(d, qkv.data() + l.qoff, l.ldq, qkv.data() + l.koff, l.ldk, qkv.data() + l.voff, l.ldv,
                           probs.data(), dout.data(), l.ldo, dqkv.data() + l.qoff, dqkv.data() + l.koff,
                           dqkv.data() + l.voff);

  DeviceBuffer<float> gqkv(qkv), gdout(dout), gprobs(std::vector<float>(l.probs_size, 777.0f)),
      gout(std::vector<float>(l.out_size, 777.0f)), gdqkv(std::vector<float>(l.size, 777.0f));
  DeviceBuffer<int32_t> glen(c.key_lengths);
  float* q = gqkv.get() + l.qoff;
  float* k = gqkv.get() + l.koff;
  float* v = gqkv.get() + l.voff;
  gpu().attention_forward(d, q, l.ldq, k, l.ldk, v, l.ldv, glen.get(), gprobs.get(), gout.get(), l.ldo);
  EXPECT_TRUE(all_close("attention probs", gprobs.download(), probs, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("attention out (and its untouched columns)", gout.download(), out, 1e-5, 1e-5));
  // Backward from the CPU's probabilities, so that both devices differentiate the same forward.
  DeviceBuffer<float> cprobs(probs);
  gpu().attention_backward(d, q, l.ldq, k, l.ldk, v, l.ldv, cprobs.get(), gdout.get(), l.ldo,
                           gdqkv.get() + l.qoff, gdqkv.get() + l.koff, gdqkv.get() + l.voff);
  // The sentinel 777 outside the heads' columns must survive on both devices.
  EXPECT_TRUE(all_close("attention dq/dk/dv (and their untouched columns)", gdqkv.download(), dqkv, 1e-4, 1e-4));
}

TEST_P(AttentionGpu, TwoRunsGiveTheSameBits) {
  const AttnCase c = GetParam();
  const AttentionDims d{c.batch, c.heads, c.q_len, c.k_len, c.head_dim, c.causal};
  const AttnLayout l(c);
  DeviceBuffer<float> gqkv(random_floats(l.size, 550)), gdout(random_floats(l.out_size, 551));
  DeviceBuffer<int32_t> glen(c.key_lengths);
  const float* q = gqkv.get() + l.qoff;
  const float* k = gqkv.get() + l.koff;
  const float* v = gqkv.get() + l.voff;
  std::vector<float> runs[2][3];
  for (auto& r : runs) {
    DeviceBuffer<float> probs(l.probs_size), out(l.out_size), dqkv(l.size);
    gpu().attention_forward(d, q, l.ldq, k, l.ldk, v, l.ldv, glen.get(), probs.get(), out.get(), l.ldo);
    gpu().attention_backward(d, q, l.ldq, k, l.ldk, v, l.ldv, probs.get(), gdout.get(), l.ldo, dqkv.get() + l.qoff,
                             dqkv.get() + l.koff, dqkv.get() + l.voff);
    r[0] = probs.download();
    r[1] = out.download();
    r[2] = dqkv.download();
  }
  EXPECT_TRUE(same_bits("attention probs", runs[0][0], runs[1][0]));
  EXPECT_TRUE(same_bits("attention out", runs[0][1], runs[1][1]));
  EXPECT_TRUE(same_bits("attention dq/dk/dv", runs[0][2], runs[1][2]));
}

// Keys and values kept as bf16 bits (the decoder's cache under bf16 storage): the GPU's forward on
// them gives the bits of its fp32 forward on their widened values, and the CPU's bf16-kv forward's
// values within the fp32 tolerance.
TEST_P(AttentionGpu, Bf16KeysAndValuesGiveTheBitsOfTheWidenedForward) {
  const AttnCase c = GetParam();
  const AttentionDims d{c.batch, c.heads, c.q_len, c.k_len, c.head_dim, c.causal};
  const AttnLayout l(c);
  const auto qkv = random_floats(l.size, 560, -2.0f, 2.0f);
  std::vector<uint16_t> qkv16(qkv.size());
  std::vector<float> widened(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) {
    qkv16[i] = f32_to_bf16(qkv[i]);
    widened[i] = bf16_to_f32(qkv16[i]);
  }
  std::vector<float> probs(l.probs_size), out(l.out_size, 777.0f);
  cpu().attention_forward_bf16_kv(d, qkv.data() + l.qoff, l.ldq, qkv16.data() + l.koff, l.ldk, qkv16.data() + l.voff,
                                  l.ldv, c.key_lengths.data(), probs.data(), out.data(), l.ldo);
  DeviceBuffer<float> gq(qkv), gwide(widened), wprobs(std::vector<float>(l.probs_size, 777.0f)),
      wout(std::vector<float>(l.out_size, 777.0f)), bprobs(std::vector<float>(l.probs_size, 777.0f)),
      bout(std::vector<float>(l.out_size, 777.0f));
  DeviceBuffer<uint16_t> gkv16(qkv16);
  DeviceBuffer<int32_t> glen(c.key_lengths);
  const float* q = gq.get() + l.qoff;
  gpu().attention_forward(d, q, l.ldq, gwide.get() + l.koff, l.ldk, gwide.get() + l.voff, l.ldv, glen.get(),
                          wprobs.get(), wout.get(), l.ldo);
  gpu().attention_forward_bf16_kv(d, q, l.ldq, gkv16.get() + l.koff, l.ldk, gkv16.get() + l.voff, l.ldv, glen.get(),
                                  bprobs.get(), bout.get(), l.ldo);
  const auto got_probs = bprobs.download(), got_out = bout.download();
  EXPECT_TRUE(same_bits("bf16-kv probs", got_probs, wprobs.download()));
  EXPECT_TRUE(same_bits("bf16-kv out", got_out, wout.download()));
  EXPECT_TRUE(all_close("bf16-kv probs against the CPU", got_probs, probs, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("bf16-kv out against the CPU", got_out, out, 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionGpu,
    ::testing::Values(AttnCase{"tiny", 1, 1, 1, 1, 4, false, false, {1}},
                      AttnCase{"padded", 3, 2, 7, 9, 16, false, false, {9, 4, 1}},
                      AttnCase{"causal_self", 2, 4, 33, 33, 64, true, false, {33, 20}},
                      AttnCase{"causal_shorter_queries", 2, 2, 5, 12, 32, true, false, {12, 7}},
                      AttnCase{"no_keys_in_a_row", 2, 2, 6, 6, 8, false, false, {6, 0}},
                      AttnCase{"fused_qkv_causal", 4, 8, 50, 50, 64, true, true, {50, 31, 1, 49}},
                      AttnCase{"fused_qkv_long", 2, 16, 100, 100, 64, false, true, {100, 73}},
                      AttnCase{"cross_long_keys", 2, 4, 20, 700, 64, false, false, {700, 333}}),
    attn_name);

}  // namespace
