// The gnmt's kernels on the CPU: the fused LSTM cell and normalized Bahdanau attention.
// Gradients against central differences (grad_check.h), including the kept-state rows of the LSTM
// (lengths), its strided h buffers, a 3-step unroll chained through W_h with gemm, and attention's
// key masks and strided context; plus small cases whose answer is known by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "grad_check.h"
#include "kernels/ops.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

constexpr float kJunk = 777.0f;

// Concatenates its arguments as text (test names; GCC 12 warns falsely on chains of string +).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}  // what an overwritten output starts as, or a padding column holds

double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ================================ LSTM cell ================================

TEST(LstmCell, ZeroGatesGiveHalfGatesAndKnownState) {
  // Every pre-activation 0: i = f = o = 1/2, g = 0, so c = c_prev / 2 and h = tanh(c) / 2.
  const int n = 2, H = 3;
  std::vector<float> gates(n * 4 * H, 0.0f), c_prev{1.0f, -2.0f, 0.5f, 4.0f, 0.0f, -0.25f}, h_prev(n * H, 9.0f);
  std::vector<float> acts(n * 4 * H, kJunk), c(n * H, kJunk), h(n * H, kJunk);
  lstm_cell_forward(gates.data(), c_prev.data(), h_prev.data(), H, n, H, nullptr, 0, acts.data(), c.data(), h.data(),
                    H);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < H; ++j) {
      const int e = r * H + j;
      EXPECT_FLOAT_EQ(acts[r * 4 * H + j], 0.5f);
      EXPECT_FLOAT_EQ(acts[r * 4 * H + H + j], 0.5f);
      EXPECT_FLOAT_EQ(acts[r * 4 * H + 2 * H + j], 0.0f);
      EXPECT_FLOAT_EQ(acts[r * 4 * H + 3 * H + j], 0.5f);
      EXPECT_FLOAT_EQ(c[e], 0.5f * c_prev[e]);
      EXPECT_NEAR(h[e], 0.5 * std::tanh(0.5 * c_prev[e]), 1e-7);
    }
}

TEST(LstmCell, KnownGatesGiveTheFormula) {
  // One unit, gates (i, f, g, o) = (1, -2, 0.5, 3), c_prev = 0.7.
  const std::vector<float> gates{1.0f, -2.0f, 0.5f, 3.0f}, c_prev{0.7f}, h_prev{0.0f};
  std::vector<float> acts(4), c(1), h(1);
  lstm_cell_forward(gates.data(), c_prev.data(), h_prev.data(), 1, 1, 1, nullptr, 0, acts.data(), c.data(), h.data(),
                    1);
  const double cw = sigmoid_d(-2.0) * 0.7 + sigmoid_d(1.0) * std::tanh(0.5);
  EXPECT_NEAR(c[0], cw, 1e-6);
  EXPECT_NEAR(h[0], sigmoid_d(3.0) * std::tanh(cw), 1e-6);
}

TEST(LstmCell, RowsPastTheirLengthKeepStateAndPassGradientsThrough) {
  const int n = 4, H = 5, t = 2, ld_h = 8;
  const std::vector<int32_t> lengths{3, 2, 0, 5};  // rows 1 and 2 are past their end at t = 2
  const auto gates = random_vec(n * 4 * H, 1, -2.0f, 2.0f), c_prev = random_vec(n * H, 2);
  const auto h_prev = random_vec(n * ld_h, 3), dh = random_vec(n * ld_h, 4), dc = random_vec(n * H, 5);
  std::vector<float> acts(n * 4 * H), c(n * H), h(n * ld_h, kJunk);
  lstm_cell_forward(gates.data(), c_prev.data(), h_prev.data(), ld_h, n, H, lengths.data(), t, acts.data(), c.data(),
                    h.data(), ld_h);
  std::vector<float> dgates(n * 4 * H, kJunk), dc_prev(n * H, kJunk), dh_prev(n * H, kJunk);
  lstm_cell_backward(acts.data(), c_prev.data(), c.data(), dh.data(), ld_h, dc.data(), n, H, lengths.data(), t,
                     dgates.data(), dc_prev.data(), dh_prev.data());
  for (int r = 0; r < n; ++r) {
    const bool kept = lengths[r] <= t;
    for (int j = 0; j < H; ++j) {
      const int e = r * H + j;
      if (kept) {
        EXPECT_EQ(c[e], c_prev[e]) << "row " << r;
        EXPECT_EQ(h[r * ld_h + j], h_prev[r * ld_h + j]) << "row " << r;
        EXPECT_EQ(dc_prev[e], dc[e]) << "row " << r;
        EXPECT_EQ(dh_prev[e], dh[r * ld_h + j]) << "row " << r;
        for (int k = 0; k < 4; ++k) EXPECT_EQ(dgates[r * 4 * H + k * H + j], 0.0f) << "row " << r;
      } else {
        EXPECT_NE(c[e], c_prev[e]) << "row " << r;
        EXPECT_EQ(dh_prev[e], 0.0f) << "row " << r;
        EXPECT_NE(dgates[r * 4 * H + j], 0.0f) << "row " << r;
      }
    }
    for (int j = H; j < ld_h; ++j) EXPECT_EQ(h[r * ld_h + j], kJunk) << "h's padding columns are not written";
  }
  // dc_prev may alias dc.
  std::vector<float> dc_alias = dc, dgates2(n * 4 * H), dh_prev2(n * H);
  lstm_cell_backward(acts.data(), c_prev.data(), c.data(), dh.data(), ld_h, dc_alias.data(), n, H, lengths.data(), t,
                     dgates2.data(), dc_alias.data(), dh_prev2.data());
  EXPECT_EQ(dc_alias, dc_prev);
  EXPECT_EQ(dgates2, dgates);
}

struct LstmCase {
  int n, hidden;
  bool lengths;
  int pad_h, pad_h_prev, pad_dh;  // extra columns of the strided h buffers
};

void PrintTo(const LstmCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " hidden=", c.hidden, " lengths=", c.lengths, " pads=", c.pad_h, ",", c.pad_h_prev, ",", c.pad_dh);
}

class LstmCellGrad : public ::testing::TestWithParam<LstmCase> {};

// loss = sum h * rh + sum c * rc, so dh = rh (given at stride ld_dh) and dc = rc.
TEST_P(LstmCellGrad, BackwardMatchesFiniteDifferences) {
  const LstmCase p = GetParam();
  const int n = p.n, H = p.hidden, t = 3;
  const int ld_h = H + p.pad_h, ld_hp = H + p.pad_h_prev, ld_dh = H + p.pad_dh;
  std::vector<int32_t> lengths(n);
  for (int r = 0; r < n; ++r) lengths[r] = (r % 3 == 1) ? t : t + 1 + r;  // every third row kept
  const int32_t* len = p.lengths ? lengths.data() : nullptr;
  auto gates = random_vec(size_t(n) * 4 * H, 11, -2.0f, 2.0f), c_prev = random_vec(size_t(n) * H, 12, -1.5f, 1.5f);
  auto h_prev = random_vec(size_t(n) * ld_hp, 13);
  const auto rc = random_vec(size_t(n) * H, 14);
  auto dh = random_vec(size_t(n) * ld_dh, 15);
  for (int r = 0; r < n; ++r)  // junk in dh's padding: must not be read
    for (int j = H; j < ld_dh; ++j) dh[size_t(r) * ld_dh + j] = kJunk;
  std::vector<float> acts(size_t(n) * 4 * H), c(size_t(n) * H), h(size_t(n) * ld_h, kJunk);
  auto loss = [&] {
    lstm_cell_forward(gates.data(), c_prev.data(), h_prev.data(), ld_hp, n, H, len, t, acts.data(), c.data(),
                      h.data(), ld_h);
    double s = dot(c.data(), rc.data(), c.size());
    for (int r = 0; r < n; ++r) s += dot(h.data() + size_t(r) * ld_h, dh.data() + size_t(r) * ld_dh, H);
    return s;
  };
  loss();
  for (int r = 0; r < n; ++r)
    for (int j = H; j < ld_h; ++j) ASSERT_EQ(h[size_t(r) * ld_h + j], kJunk) << "h's padding written";
  std::vector<float> dgates(gates.size(), kJunk), dc_prev(c.size(), kJunk), dh_prev(size_t(n) * H, kJunk);
  lstm_cell_backward(acts.data(), c_prev.data(), c.data(), dh.data(), ld_dh, rc.data(), n, H, len, t, dgates.data(),
                     dc_prev.data(), dh_prev.data());
  // dh_prev laid out as h_prev (zero in the padding columns, which the forward never reads).
  std::vector<float> dh_prev_wide(h_prev.size(), 0.0f);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < H; ++j) dh_prev_wide[size_t(r) * ld_hp + j] = dh_prev[size_t(r) * H + j];
  expect_grad_close("dgates", loss, gates.data(), gates.size(), dgates.data(), 1e-3, 1e-2, 1e-3, 200);
  expect_grad_close("dc_prev", loss, c_prev.data(), c_prev.size(), dc_prev.data(), 1e-3, 1e-2, 1e-3, 200);
  expect_grad_close("dh_prev", loss, h_prev.data(), h_prev.size(), dh_prev_wide.data(), 1e-3, 1e-2, 1e-3, 200);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LstmCellGrad,
                         ::testing::Values(LstmCase{3, 4, false, 0, 0, 0},   // contiguous, every row live
                                           LstmCase{5, 7, true, 0, 0, 0},    // kept-state rows
                                           LstmCase{6, 5, true, 3, 5, 2},    // strided h, h_prev, dh
                                           LstmCase{4, 33, true, 33, 66, 1}),  // h a column block of [n, 2H]
                         [](const ::testing::TestParamInfo<LstmCase>& i) {
                           const LstmCase& c = i.param;
                           return cat("n", c.n, "_h", c.hidden, c.lengths ? "_lengths" : "",
                                      c.pad_h + c.pad_h_prev + c.pad_dh > 0 ? "_strided" : "");
                         });

// Three steps of gates_t = xg_t + h_{t-1} W_h, loss = h_3 . r; the backward chained through the
// steps (dh_{t-1} = dh_prev + dgates W_h^T, dW_h += h_{t-1}^T dgates) against central differences
// w.r.t. h_0, c_0, W_h and the input gates xg. Row lengths 3, 2, 1, 3, 0: rows stop at every step.
TEST(LstmCellGrad, ThreeStepUnrollMatchesFiniteDifferences) {
  const int n = 5, H = 6, G = 4 * H, T = 3;
  const std::vector<int32_t> lengths{3, 2, 1, 3, 0};
  auto h0 = random_vec(size_t(n) * H, 21), c0 = random_vec(size_t(n) * H, 22);
  auto W = random_vec(size_t(H) * G, 23, -0.6f, 0.6f), xg = random_vec(size_t(T) * n * G, 24, -1.0f, 1.0f);
  const auto r = random_vec(size_t(n) * H, 25);
  // States h[t], c[t] for t = 0..T; gates and acts per step.
  std::vector<std::vector<float>> h(T + 1, std::vector<float>(size_t(n) * H)), c = h;
  std::vector<std::vector<float>> gates(T, std::vector<float>(size_t(n) * G)), acts = gates;
  auto loss = [&] {
    h[0] = h0;
    c[0] = c0;
    for (int t = 0; t < T; ++t) {
      gates[t].assign(xg.begin() + size_t(t) * n * G, xg.begin() + size_t(t + 1) * n * G);
      gemm(false, false, n, G, H, 1.0f, h[t].data(), H, W.data(), G, 1.0f, gates[t].data(), G);
      lstm_cell_forward(gates[t].data(), c[t].data(), h[t].data(), H, n, H, lengths.data(), t, acts[t].data(),
                        c[t + 1].data(), h[t + 1].data(), H);
    }
    return dot(h[T].data(), r.data(), r.size());
  };
  loss();
  std::vector<float> dh = r, dc(size_t(n) * H, 0.0f), dW(W.size(), 0.0f), dxg(xg.size());
  std::vector<float> dgates(size_t(n) * G), dh_prev(size_t(n) * H);
  for (int t = T - 1; t >= 0; --t) {
    lstm_cell_backward(acts[t].data(), c[t].data(), c[t + 1].data(), dh.data(), H, dc.data(), n, H, lengths.data(),
                       t, dgates.data(), dc.data(), dh_prev.data());  // dc_prev aliases dc
    std::copy(dgates.begin(), dgates.end(), dxg.begin() + size_t(t) * n * G);
    gemm(true, false, H, G, n, 1.0f, h[t].data(), H, dgates.data(), G, 1.0f, dW.data(), G);
    gemm(false, true, n, H, G, 1.0f, dgates.data(), G, W.data(), G, 1.0f, dh_prev.data(), H);
    dh = dh_prev;
  }
  expect_grad_close("dh0", loss, h0.data(), h0.size(), dh.data(), 1e-3, 1e-2, 1e-3);
  expect_grad_close("dc0", loss, c0.data(), c0.size(), dc.data(), 1e-3, 1e-2, 1e-3);
  expect_grad_close("dW_h", loss, W.data(), W.size(), dW.data(), 1e-3, 1e-2, 1e-3, 144);
  expect_grad_close("dxg", loss, xg.data(), xg.size(), dxg.data(), 1e-3, 1e-2, 1e-3, 360);
  // The row with length 0 never moved: its h_3 is h_0, its gradient r.
  for (int j = 0; j < H; ++j) EXPECT_EQ(h[T][4 * H + j], h0[4 * H + j]);
}

// ================================ Additive attention ================================

struct AttnInputs {
  AdditiveAttentionDims d;
  std::vector<float> qp, kp, bias, v, g, values;
  std::vector<int32_t> key_lengths;
  AttnInputs(const AdditiveAttentionDims& dims, uint64_t s) : d(dims) {
    qp = random_vec(size_t(d.batch) * d.q_len * d.units, s + 1);
    kp = random_vec(size_t(d.batch) * d.k_len * d.units, s + 2);
    bias = random_vec(d.units, s + 3, -0.5f, 0.5f);
    v = random_vec(d.units, s + 4);
    g = {1.7f};
    values = random_vec(size_t(d.batch) * d.k_len * d.value_dim, s + 5);
    key_lengths.assign(d.batch, d.k_len);
  }
};

AdditiveAttentionDims attn_dims(int batch, int q_len, int k_len, int units, int value_dim) {
  AdditiveAttentionDims d;
  d.batch = batch, d.q_len = q_len, d.k_len = k_len, d.units = units, d.value_dim = value_dim;
  return d;
}

// The definition, in double with libm's tanh: probs and context of every query row.
void reference_attention(const AttnInputs& in, std::vector<double>& probs, std::vector<double>& context) {
  const auto& d = in.d;
  double nv = 0.0;
  for (float x : in.v) nv += double(x) * x;
  nv = std::sqrt(nv);
  probs.assign(size_t(d.batch) * d.q_len * d.k_len, 0.0);
  context.assign(size_t(d.batch) * d.q_len * d.value_dim, 0.0);
  for (int b = 0; b < d.batch; ++b)
    for (int i = 0; i < d.q_len; ++i) {
      const size_t row = size_t(b) * d.q_len + i;
      const int len = in.key_lengths[b];
      std::vector<double> s(len);
      double mx = -1e300, sum = 0.0;
      for (int j = 0; j < len; ++j) {
        for (int a = 0; a < d.units; ++a)
          s[j] += in.g[0] * in.v[a] / nv *
                  std::tanh(double(in.qp[row * d.units + a]) + in.kp[(size_t(b) * d.k_len + j) * d.units + a] +
                            in.bias[a]);
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < len; ++j) sum += std::exp(s[j] - mx);
      for (int j = 0; j < len; ++j) {
        const double p = std::exp(s[j] - mx) / sum;
        probs[row * d.k_len + j] = p;
        for (int c = 0; c < d.value_dim; ++c)
          context[row * d.value_dim + c] += p * in.values[(size_t(b) * d.k_len + j) * d.value_dim + c];
      }
    }
}

TEST(AdditiveAttention, ForwardMatchesTheDefinitionInDouble) {
  AttnInputs in(attn_dims(3, 4, 6, 37, 5), 100);  // 37 units: two 16-lane blocks and a tail
  for (auto& x : in.qp) x *= 3.0f;                 // scores over tanh's whole range
  in.key_lengths = {6, 4, 1};
  const int ld = 8;
  const auto& d = in.d;
  std::vector<float> probs(size_t(d.batch) * d.q_len * d.k_len, kJunk), ctx(size_t(d.batch) * d.q_len * ld, kJunk);
  additive_attention_forward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                             in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), ld);
  std::vector<double> rp, rc;
  reference_attention(in, rp, rc);
  for (size_t e = 0; e < probs.size(); ++e) EXPECT_NEAR(probs[e], rp[e], 1e-6) << "probs " << e;
  for (size_t row = 0; row < size_t(d.batch) * d.q_len; ++row) {
    for (int c = 0; c < d.value_dim; ++c) EXPECT_NEAR(ctx[row * ld + c], rc[row * d.value_dim + c], 1e-6);
    for (int c = d.value_dim; c < ld; ++c) EXPECT_EQ(ctx[row * ld + c], kJunk) << "context padding written";
  }
}

// The beam search: a sentence's hypotheses are its queries (q_len = beam) over its one copy of the
// keys and values, which must give each hypothesis the bits of a batch row of its own over a copy
// of them (q_len 1), as the decoder computed it before.
TEST(AdditiveAttention, BeamQueriesOverSharedKeysGiveTheBitsOfEachAlone) {
  const int sentences = 3, beam = 4, keys = 9, units = 37, value_dim = 20;
  AttnInputs shared(attn_dims(sentences, beam, keys, units, value_dim), 400);
  shared.key_lengths = {9, 5, 1};
  AttnInputs alone(attn_dims(sentences * beam, 1, keys, units, value_dim), 400);
  alone.qp = shared.qp;
  alone.bias = shared.bias, alone.v = shared.v, alone.g = shared.g;
  alone.kp.clear(), alone.values.clear(), alone.key_lengths.clear();
  for (int b = 0; b < sentences; ++b)
    for (int j = 0; j < beam; ++j) {
      alone.kp.insert(alone.kp.end(), shared.kp.begin() + size_t(b) * keys * units,
                      shared.kp.begin() + size_t(b + 1) * keys * units);
      alone.values.insert(alone.values.end(), shared.values.begin() + size_t(b) * keys * value_dim,
                          shared.values.begin() + size_t(b + 1) * keys * value_dim);
      alone.key_lengths.push_back(shared.key_lengths[size_t(b)]);
    }
  auto run = [&](const AttnInputs& in, std::vector<float>& probs, std::vector<float>& ctx) {
    probs.assign(size_t(sentences) * beam * keys, kJunk);
    ctx.assign(size_t(sentences) * beam * value_dim, kJunk);
    additive_attention_forward(in.d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                               in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), value_dim);
  };
  std::vector<float> probs_shared, ctx_shared, probs_alone, ctx_alone;
  run(shared, probs_shared, ctx_shared);
  run(alone, probs_alone, ctx_alone);
  for (size_t i = 0; i < probs_shared.size(); ++i) ASSERT_EQ(f32_bits(probs_shared[i]), f32_bits(probs_alone[i])) << i;
  for (size_t i = 0; i < ctx_shared.size(); ++i) ASSERT_EQ(f32_bits(ctx_shared[i]), f32_bits(ctx_alone[i])) << i;
}

TEST(AdditiveAttention, OneUnmaskedKeyGivesItsValueAndNoKeyGivesZero) {
  AttnInputs in(attn_dims(3, 2, 4, 16, 3), 200);
  in.key_lengths = {1, 0, 4};
  const auto& d = in.d;
  std::vector<float> probs(size_t(d.batch) * d.q_len * d.k_len, kJunk), ctx(size_t(d.batch) * d.q_len * 3, kJunk);
  additive_attention_forward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                             in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), 3);
  for (int i = 0; i < d.q_len; ++i) {
    // batch row 0: all the weight on key 0, context = values[0, 0, :].
    EXPECT_EQ(probs[size_t(i) * d.k_len], 1.0f);
    for (int j = 1; j < d.k_len; ++j) EXPECT_EQ(probs[size_t(i) * d.k_len + j], 0.0f);
    for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(ctx[size_t(i) * 3 + c], in.values[c]);
    // batch row 1: no key, probs and context 0.
    for (int j = 0; j < d.k_len; ++j) EXPECT_EQ(probs[(size_t(d.q_len) + i) * d.k_len + j], 0.0f);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(ctx[(size_t(d.q_len) + i) * 3 + c], 0.0f);
  }
}

TEST(AdditiveAttention, EqualKeysGiveUniformWeightsAndTheMeanValue) {
  AttnInputs in(attn_dims(1, 2, 5, 16, 4), 300);
  for (int j = 1; j < 5; ++j)  // every key equal to key 0
    for (int a = 0; a < 16; ++a) in.kp[size_t(j) * 16 + a] = in.kp[a];
  in.key_lengths = {3};
  std::vector<float> probs(2 * 5), ctx(2 * 4);
  additive_attention_forward(in.d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                             in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), 4);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 5; ++j) EXPECT_NEAR(probs[i * 5 + j], j < 3 ? 1.0 / 3.0 : 0.0, 1e-7);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(ctx[i * 4 + c], (in.values[c] + in.values[4 + c] + in.values[8 + c]) / 3.0, 1e-6);
  }
}

struct AttnCase {
  int batch, q_len, k_len, units, value_dim;
  bool masks;
  int pad_context;
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << cat("batch=", c.batch, " q_len=", c.q_len, " k_len=", c.k_len, " units=", c.units, " value_dim=", c.value_dim,
             " masks=", c.masks, " pad_context=", c.pad_context);
}

class AdditiveAttentionGrad : public ::testing::TestWithParam<AttnCase> {};

// loss = sum context * r over the value columns; dcontext = r at stride ld_context (junk padding).
TEST_P(AdditiveAttentionGrad, BackwardMatchesFiniteDifferences) {
  const AttnCase p = GetParam();
  AttnInputs in(attn_dims(p.batch, p.q_len, p.k_len, p.units, p.value_dim), 400);
  if (p.masks)
    for (int b = 0; b < p.batch; ++b) in.key_lengths[b] = std::max(1, p.k_len - 2 * b);  // batch row 0 unmasked
  const auto& d = in.d;
  const int ld = p.value_dim + p.pad_context;
  const size_t rows = size_t(d.batch) * d.q_len;
  auto dctx = random_vec(rows * ld, 401);
  for (size_t row = 0; row < rows; ++row)
    for (int c = p.value_dim; c < ld; ++c) dctx[row * ld + c] = kJunk;
  std::vector<float> probs(rows * d.k_len), ctx(rows * ld);
  auto loss = [&] {
    additive_attention_forward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                               in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), ld);
    double s = 0.0;
    for (size_t row = 0; row < rows; ++row) s += dot(ctx.data() + row * ld, dctx.data() + row * ld, p.value_dim);
    return s;
  };
  loss();
  std::vector<float> dqp(in.qp.size(), kJunk), dkp(in.kp.size(), kJunk), dvalues(in.values.size(), kJunk);
  const auto dbias0 = random_vec(d.units, 402), dv0 = random_vec(d.units, 403);  // accumulated onto
  std::vector<float> dbias = dbias0, dv = dv0, dg{0.25f};
  additive_attention_backward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                              in.values.data(), in.key_lengths.data(), probs.data(), dctx.data(), ld, dqp.data(),
                              dkp.data(), dvalues.data(), dbias.data(), dv.data(), dg.data());
  for (int a = 0; a < d.units; ++a) {
    dbias[a] -= dbias0[a];
    dv[a] -= dv0[a];
  }
  dg[0] -= 0.25f;
  const double eps = 2e-3, rtol = 1e-2, atol = 5e-4;
  expect_grad_close("dqp", loss, in.qp.data(), in.qp.size(), dqp.data(), eps, rtol, atol, 150);
  expect_grad_close("dkp", loss, in.kp.data(), in.kp.size(), dkp.data(), eps, rtol, atol, 150);
  expect_grad_close("dvalues", loss, in.values.data(), in.values.size(), dvalues.data(), eps, rtol, atol, 150);
  expect_grad_close("dbias", loss, in.bias.data(), in.bias.size(), dbias.data(), eps, rtol, atol);
  expect_grad_close("dv", loss, in.v.data(), in.v.size(), dv.data(), eps, rtol, atol);
  expect_grad_close("dg", loss, in.g.data(), 1, dg.data(), eps, rtol, atol);
  // Masked keys: no gradient, and the overwritten buffers hold zeros there (not the junk).
  for (int b = 0; b < d.batch; ++b)
    for (int j = in.key_lengths[b]; j < d.k_len; ++j) {
      for (int a = 0; a < d.units; ++a) EXPECT_EQ(dkp[(size_t(b) * d.k_len + j) * d.units + a], 0.0f);
      for (int c = 0; c < d.value_dim; ++c) EXPECT_EQ(dvalues[(size_t(b) * d.k_len + j) * d.value_dim + c], 0.0f);
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AdditiveAttentionGrad,
                         ::testing::Values(AttnCase{1, 1, 1, 1, 1, false, 0},   // one key: probs 1
                                           AttnCase{2, 3, 4, 8, 5, false, 0},   // fewer units than a lane block
                                           AttnCase{3, 4, 7, 20, 6, true, 3},   // masks, strided context
                                           AttnCase{2, 5, 9, 37, 33, true, 7}),  // lane blocks + tails
                         [](const ::testing::TestParamInfo<AttnCase>& i) {
                           const AttnCase& c = i.param;
                           return cat("b", c.batch, "_q", c.q_len, "_k", c.k_len, "_u", c.units, "_v", c.value_dim,
                                      c.masks ? "_masked" : "", c.pad_context ? "_strided" : "");
                         });

}  // namespace
