// The CUDA gnmt ops (LSTM cell, normalized Bahdanau attention) against the CPU ones, through the op
// tables, on the same random inputs: forward outputs and saved activations, then the backward fed the
// CPU forward's saved tensors (so both devices see the same ones), with the accumulated gradients
// (dbias, dv, dg) starting from non-zero values, the strided h / dh / context buffers' padding
// untouched, and the backward rerun to the same bits.
// Tolerances (fp32): |got - want| <= rel*|want| + abs, abs a fraction of the largest |want| of the
// tensor. The two devices use different exp/tanh (libm or the CPU's vectorised tanh vs CUDA's) and
// sum in different orders, each within a few ulp per term; LSTM 1e-5 relative (pointwise), attention
// forward 1e-4, attention gradients 1e-3 (sums over keys, query rows and units).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

constexpr float kJunk = 777.0f;

// all_close with abs = abs_frac * max|want| (at least 1e-30 so an all-zero tensor must be exact-ish).
::testing::AssertionResult close_scaled(const std::string& what, const std::vector<float>& got,
                                        const std::vector<float>& want, double rel, double abs_frac) {
  double mx = 0.0;
  for (float w : want)
    if (std::fabs(w) != kJunk) mx = std::max(mx, double(std::fabs(w)));
  return all_close(what, got, want, rel, std::max(1e-30, abs_frac * mx));
}

// ================================ LSTM cell ================================
struct LstmCase {
  int n, hidden;
  bool lengths;
  int pad;  // extra columns of h, h_prev and dh
};

std::string lstm_name(const ::testing::TestParamInfo<LstmCase>& i) {
  return cat("n", i.param.n, "_h", i.param.hidden, i.param.lengths ? "_lengths" : "", i.param.pad ? "_strided" : "");
}

struct LstmInputs {
  int ld;
  std::vector<float> gates, c_prev, h_prev, dh, dc;
  std::vector<int32_t> lengths;
  explicit LstmInputs(const LstmCase& p) : ld(p.hidden + p.pad) {
    const size_t nh = size_t(p.n) * p.hidden;
    gates = random_floats(nh * 4, 60, -3.0f, 3.0f);
    c_prev = random_floats(nh, 61, -2.0f, 2.0f);
    h_prev = random_floats(size_t(p.n) * ld, 62);
    dh = random_floats(size_t(p.n) * ld, 63);
    dc = random_floats(nh, 64);
    const auto l = random_indices(p.n, 65, 6);  // t = 2: rows of length 0, 1, 2 keep their state
    lengths.assign(l.begin(), l.end());
  }
};
constexpr int kStep = 2;

void PrintTo(const LstmCase& c, std::ostream* os) {
  *os << cat("n=", c.n, " hidden=", c.hidden, " lengths=", c.lengths, " pad=", c.pad);
}

class LstmCellGpu : public GpuTestWithParam<LstmCase> {};

TEST_P(LstmCellGpu, ForwardMatchesCpu) {
  const LstmCase p = GetParam();
  const LstmInputs in(p);
  const size_t nh = size_t(p.n) * p.hidden;
  std::vector<float> acts(4 * nh), c(nh), h(size_t(p.n) * in.ld, kJunk);
  cpu().lstm_cell_forward(in.gates.data(), in.c_prev.data(), in.h_prev.data(), in.ld, p.n, p.hidden,
                          p.lengths ? in.lengths.data() : nullptr, kStep, acts.data(), c.data(), h.data(), in.ld);
  DeviceBuffer<float> gg(in.gates), gcp(in.c_prev), ghp(in.h_prev), gacts(std::vector<float>(4 * nh, kJunk)),
      gc(std::vector<float>(nh, kJunk)), gh(std::vector<float>(h.size(), kJunk));
  DeviceBuffer<int32_t> glen(in.lengths);
  gpu().lstm_cell_forward(gg.get(), gcp.get(), ghp.get(), in.ld, p.n, p.hidden, p.lengths ? glen.get() : nullptr,
                          kStep, gacts.get(), gc.get(), gh.get(), in.ld);
  EXPECT_TRUE(all_close("lstm_cell_forward acts", gacts.download(), acts, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("lstm_cell_forward c", gc.download(), c, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("lstm_cell_forward h (padding untouched)", gh.download(), h, 1e-5, 1e-6));
}

TEST_P(LstmCellGpu, BackwardMatchesCpu) {
  const LstmCase p = GetParam();
  const LstmInputs in(p);
  const size_t nh = size_t(p.n) * p.hidden;
  const int32_t* len = p.lengths ? in.lengths.data() : nullptr;
  std::vector<float> acts(4 * nh), c(nh), h(size_t(p.n) * in.ld);
  cpu().lstm_cell_forward(in.gates.data(), in.c_prev.data(), in.h_prev.data(), in.ld, p.n, p.hidden, len, kStep,
                          acts.data(), c.data(), h.data(), in.ld);
  std::vector<float> dgates(4 * nh), dc_prev(nh), dh_prev(nh);
  cpu().lstm_cell_backward(acts.data(), in.c_prev.data(), c.data(), in.dh.data(), in.ld, in.dc.data(), p.n, p.hidden,
                           len, kStep, dgates.data(), dc_prev.data(), dh_prev.data());
  DeviceBuffer<float> gacts(acts), gcp(in.c_prev), gc(c), gdh(in.dh), gdc(in.dc),
      gdg(std::vector<float>(4 * nh, kJunk)), gdcp(std::vector<float>(nh, kJunk)), gdhp(std::vector<float>(nh, kJunk));
  DeviceBuffer<int32_t> glen(in.lengths);
  const int32_t* glp = p.lengths ? glen.get() : nullptr;
  gpu().lstm_cell_backward(gacts.get(), gcp.get(), gc.get(), gdh.get(), in.ld, gdc.get(), p.n, p.hidden, glp, kStep,
                           gdg.get(), gdcp.get(), gdhp.get());
  EXPECT_TRUE(close_scaled("lstm_cell_backward dgates", gdg.download(), dgates, 1e-5, 1e-6));
  EXPECT_TRUE(close_scaled("lstm_cell_backward dc_prev", gdcp.download(), dc_prev, 1e-5, 1e-6));
  EXPECT_TRUE(all_equal("lstm_cell_backward dh_prev", gdhp.download(), dh_prev));  // copies and zeros
  // dc_prev may alias dc.
  DeviceBuffer<float> galias(in.dc), gdg2(4 * nh), gdhp2(nh);
  gpu().lstm_cell_backward(gacts.get(), gcp.get(), gc.get(), gdh.get(), in.ld, galias.get(), p.n, p.hidden, glp,
                           kStep, gdg2.get(), galias.get(), gdhp2.get());
  EXPECT_TRUE(same_bits("lstm_cell_backward dc_prev aliasing dc", galias.download(), gdcp.download()));
}

TEST_P(LstmCellGpu, TwoRunsGiveTheSameBits) {
  const LstmCase p = GetParam();
  const LstmInputs in(p);
  const size_t nh = size_t(p.n) * p.hidden;
  DeviceBuffer<float> gg(in.gates), gcp(in.c_prev), ghp(in.h_prev), gdh(in.dh), gdc(in.dc);
  DeviceBuffer<int32_t> glen(in.lengths);
  const int32_t* glp = p.lengths ? glen.get() : nullptr;
  std::vector<float> runs[2][5];  // [run][acts, c, h, dgates, dc_prev]
  for (auto& r : runs) {
    DeviceBuffer<float> acts(4 * nh), c(nh), h(size_t(p.n) * in.ld), dg(4 * nh), dcp(nh), dhp(nh);
    gpu().lstm_cell_forward(gg.get(), gcp.get(), ghp.get(), in.ld, p.n, p.hidden, glp, kStep, acts.get(), c.get(),
                            h.get(), in.ld);
    gpu().lstm_cell_backward(acts.get(), gcp.get(), c.get(), gdh.get(), in.ld, gdc.get(), p.n, p.hidden, glp, kStep,
                             dg.get(), dcp.get(), dhp.get());
    r[0] = acts.download();
    r[1] = c.download();
    r[2] = h.download();
    r[3] = dg.download();
    r[4] = dcp.download();
  }
  const char* names[5] = {"acts", "c", "h", "dgates", "dc_prev"};
  for (int k = 0; k < 5; ++k) EXPECT_TRUE(same_bits(cat("lstm_cell ", names[k]), runs[0][k], runs[1][k]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LstmCellGpu,
                         ::testing::Values(LstmCase{5, 7, false, 0},      // odd sizes, every row live
                                           LstmCase{64, 256, true, 256},  // h a column block of [n, 2*hidden]
                                           LstmCase{128, 256, true, 3},   // gnmt's batch, odd stride
                                           LstmCase{3, 1000, true, 0}),   // wide rows, grid-stride loop
                         lstm_name);

// ================================ Additive attention ================================
struct AttnCase {
  int batch, q_len, k_len, units, value_dim;
  bool masks;
  int pad_context;
};

std::string attn_name(const ::testing::TestParamInfo<AttnCase>& i) {
  const AttnCase& c = i.param;
  return cat("b", c.batch, "_q", c.q_len, "_k", c.k_len, "_u", c.units, "_v", c.value_dim, c.masks ? "_masked" : "",
             c.pad_context ? "_strided" : "");
}

struct AttnInputs {
  AdditiveAttentionDims d;
  int ld;
  std::vector<float> qp, kp, bias, v, g, values, dcontext;
  std::vector<int32_t> key_lengths;
  explicit AttnInputs(const AttnCase& c) : ld(c.value_dim + c.pad_context) {
    d.batch = c.batch, d.q_len = c.q_len, d.k_len = c.k_len, d.units = c.units, d.value_dim = c.value_dim;
    const size_t rows = size_t(c.batch) * c.q_len, krows = size_t(c.batch) * c.k_len;
    qp = random_floats(rows * c.units, 70, -1.5f, 1.5f);
    kp = random_floats(krows * c.units, 71, -1.5f, 1.5f);
    bias = random_floats(c.units, 72, -0.5f, 0.5f);
    v = random_floats(c.units, 73);
    g = {2.5f};
    values = random_floats(krows * c.value_dim, 74);
    dcontext = random_floats(rows * ld, 75);
    key_lengths.assign(c.batch, c.k_len);
    if (c.masks)  // every 4th batch row has no key; the others from k_len down
      for (int b = 0; b < c.batch; ++b) key_lengths[b] = b % 4 == 3 ? 0 : c.k_len - (b * 7) % c.k_len;
  }
  size_t rows() const { return size_t(d.batch) * d.q_len; }
};

// The device copies of one case's inputs.
struct AttnDevice {
  DeviceBuffer<float> qp, kp, bias, v, g, values, dcontext;
  DeviceBuffer<int32_t> key_lengths;
  explicit AttnDevice(const AttnInputs& in)
      : qp(in.qp), kp(in.kp), bias(in.bias), v(in.v), g(in.g), values(in.values), dcontext(in.dcontext),
        key_lengths(in.key_lengths) {}
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << cat("batch=", c.batch, " q_len=", c.q_len, " k_len=", c.k_len, " units=", c.units, " value_dim=", c.value_dim,
             " masks=", c.masks, " pad_context=", c.pad_context);
}

class AdditiveAttentionGpu : public GpuTestWithParam<AttnCase> {};

TEST_P(AdditiveAttentionGpu, ForwardMatchesCpu) {
  const AttnInputs in(GetParam());
  const auto& d = in.d;
  std::vector<float> probs(in.rows() * d.k_len), ctx(in.rows() * in.ld, kJunk);
  cpu().additive_attention_forward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                                   in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), in.ld);
  const AttnDevice gin(in);
  DeviceBuffer<float> gprobs(std::vector<float>(probs.size(), kJunk)), gctx(std::vector<float>(ctx.size(), kJunk));
  gpu().additive_attention_forward(d, gin.qp.get(), gin.kp.get(), gin.bias.get(), gin.v.get(), gin.g.get(),
                                   gin.values.get(), gin.key_lengths.get(), gprobs.get(), gctx.get(), in.ld);
  EXPECT_TRUE(close_scaled("additive_attention_forward probs", gprobs.download(), probs, 1e-4, 1e-5));
  EXPECT_TRUE(close_scaled("additive_attention_forward context (padding untouched)", gctx.download(), ctx, 1e-4, 1e-5));
}

TEST_P(AdditiveAttentionGpu, BackwardMatchesCpu) {
  const AttnInputs in(GetParam());
  const auto& d = in.d;
  std::vector<float> probs(in.rows() * d.k_len), ctx(in.rows() * in.ld);
  cpu().additive_attention_forward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                                   in.values.data(), in.key_lengths.data(), probs.data(), ctx.data(), in.ld);
  const auto dbias0 = random_floats(d.units, 76), dv0 = random_floats(d.units, 77);  // accumulated onto
  const std::vector<float> dg0{0.5f};
  std::vector<float> dqp(in.qp.size()), dkp(in.kp.size()), dvalues(in.values.size()), dbias = dbias0, dv = dv0,
                                                                                        dg = dg0;
  cpu().additive_attention_backward(d, in.qp.data(), in.kp.data(), in.bias.data(), in.v.data(), in.g.data(),
                                    in.values.data(), in.key_lengths.data(), probs.data(), in.dcontext.data(), in.ld,
                                    dqp.data(), dkp.data(), dvalues.data(), dbias.data(), dv.data(), dg.data());
  const AttnDevice gin(in);
  DeviceBuffer<float> gprobs(probs), gdqp(std::vector<float>(dqp.size(), kJunk)),
      gdkp(std::vector<float>(dkp.size(), kJunk)), gdvalues(std::vector<float>(dvalues.size(), kJunk)),
      gdbias(dbias0), gdv(dv0), gdg(dg0);
  gpu().additive_attention_backward(d, gin.qp.get(), gin.kp.get(), gin.bias.get(), gin.v.get(), gin.g.get(),
                                    gin.values.get(), gin.key_lengths.get(), gprobs.get(), gin.dcontext.get(), in.ld,
                                    gdqp.get(), gdkp.get(), gdvalues.get(), gdbias.get(), gdv.get(), gdg.get());
  EXPECT_TRUE(close_scaled("additive_attention_backward dqp", gdqp.download(), dqp, 1e-3, 1e-4));
  EXPECT_TRUE(close_scaled("additive_attention_backward dkp", gdkp.download(), dkp, 1e-3, 1e-4));
  EXPECT_TRUE(close_scaled("additive_attention_backward dvalues", gdvalues.download(), dvalues, 1e-3, 1e-4));
  EXPECT_TRUE(close_scaled("additive_attention_backward dbias", gdbias.download(), dbias, 1e-3, 1e-4));
  EXPECT_TRUE(close_scaled("additive_attention_backward dv", gdv.download(), dv, 1e-3, 1e-4));
  EXPECT_TRUE(scalar_close("additive_attention_backward dg", gdg.download()[0], dg[0], 1e-3, 1e-5));
}

TEST_P(AdditiveAttentionGpu, TwoRunsGiveTheSameBits) {
  const AttnInputs in(GetParam());
  const auto& d = in.d;
  const AttnDevice gin(in);
  std::vector<float> runs[2][8];  // [run][probs, context, dqp, dkp, dvalues, dbias, dv, dg]
  for (auto& r : runs) {
    DeviceBuffer<float> probs(in.rows() * d.k_len), ctx(in.rows() * in.ld), dqp(in.qp.size()), dkp(in.kp.size()),
        dvalues(in.values.size()), dbias(d.units), dv(d.units), dg(1);
    gpu().additive_attention_forward(d, gin.qp.get(), gin.kp.get(), gin.bias.get(), gin.v.get(), gin.g.get(),
                                     gin.values.get(), gin.key_lengths.get(), probs.get(), ctx.get(), in.ld);
    gpu().additive_attention_backward(d, gin.qp.get(), gin.kp.get(), gin.bias.get(), gin.v.get(), gin.g.get(),
                                      gin.values.get(), gin.key_lengths.get(), probs.get(), gin.dcontext.get(), in.ld,
                                      dqp.get(), dkp.get(), dvalues.get(), dbias.get(), dv.get(), dg.get());
    r[0] = probs.download();
    r[1] = ctx.download();
    r[2] = dqp.download();
    r[3] = dkp.download();
    r[4] = dvalues.download();
    r[5] = dbias.download();
    r[6] = dv.download();
    r[7] = dg.download();
  }
  const char* names[8] = {"probs", "context", "dqp", "dkp", "dvalues", "dbias", "dv", "dg"};
  for (int k = 0; k < 8; ++k) EXPECT_TRUE(same_bits(cat("additive_attention ", names[k]), runs[0][k], runs[1][k]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AdditiveAttentionGpu,
                         ::testing::Values(AttnCase{2, 3, 5, 16, 12, false, 0},      // small, unmasked
                                           AttnCase{5, 7, 9, 37, 33, true, 5},       // odd sizes, a 0-key row
                                           AttnCase{2, 3, 300, 64, 40, true, 0},     // many keys per warp
                                           AttnCase{32, 20, 25, 256, 512, true, 0},  // gnmt-sized
                                           AttnCase{64, 1, 60, 256, 256, true, 256}),  // one decoder step, context
                                                                                       // a block of [rows, 512]
                         attn_name);

}  // namespace
