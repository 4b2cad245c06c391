#include "workloads/gnmt/gnmt_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/op_table.h"

namespace mlpd {

namespace {

size_t mul(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

constexpr float kInitBound = 0.1f;  // the reference's init_weight

// One direction of one LSTM layer: gates = x W_x + h_prev W_h + b, W_x [in, 4H], W_h [H, 4H].
struct Lstm {
  size_t w_x = 0, w_h = 0, b = 0;
  int in = 0;
};

// One LSTM layer of the encoder or the decoder (bidirectional: encoder layer 0 only).
struct Layer {
  Lstm fwd, bwd;
  bool bidir = false, residual = false;
  int in = 0;  // input width
  size_t first_view = 0, end_view = 0;
  // Saved for backward, time-major [rows, width].
  const float* x = nullptr;  // the input the LSTM saw (after dropout): xd, cat, or the layer below
  float* xd = nullptr;       // dropped-out input [rows, in] (when dropout > 0)
  uint8_t* mask = nullptr;   // its mask
  float* cat = nullptr;      // decoder layers >= 1: concat(layer below, context) [rows, 2H]
  float* h = nullptr;        // [rows, H], bidirectional [rows, 2H] = (forward | backward)
  float *c = nullptr, *c_b = nullptr;        // cell states [rows, H] (c_b: backward direction)
  float *acts = nullptr, *acts_b = nullptr;  // activated gates [rows, 4H]
  float* out = nullptr;                      // h + input (residual layers), else h
  // Decoding (decoder layers): this step's state per hypothesis and the next one's, [rows, H].
  float *st_h = nullptr, *st_c = nullptr, *nx_h = nullptr, *nx_c = nullptr;
};

struct Gnmt final : Seq2Seq {
  GnmtSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  int Hd = 0, V = 0;
  size_t embedding = 0;
  std::vector<Layer> enc, dec;
  size_t w_q = 0, w_k = 0, att_bias = 0, att_v = 0, att_g = 0, att_first = 0, att_end = 0;
  size_t cls_w = 0, cls_b = 0;
  size_t first_view = 0, end_view = 0;
  // Activations (time-major inside the LSTMs, batch-major around the attention).
  float *emb_src = nullptr, *emb_tgt = nullptr, *enc_bm = nullptr, *keys = nullptr, *q_bm = nullptr,
        *qp = nullptr, *probs = nullptr, *ctx_bm = nullptr, *ctx_tm = nullptr, *yv = nullptr, *logits = nullptr,
        *dlogits = nullptr, *dyv = nullptr;
  float *gates = nullptr, *dgates = nullptr, *zeros = nullptr;
  // Backward scratch.
  float *g_y = nullptr, *g_h = nullptr, *g_x = nullptr, *g_tmp = nullptr, *g_ctx = nullptr, *g_ctx_bm = nullptr,
        *g_qp = nullptr, *g_q_bm = nullptr, *g_keys = nullptr, *g_enc_bm = nullptr, *dh_rec = nullptr, *dc = nullptr;
  // Index arrays on the device: tokens time-major, the row permutations time-major <-> batch-major,
  // the valid target rows and their labels, lengths.
  int32_t *d_src_tm = nullptr, *d_tgt_tm = nullptr, *d_src_to_bm = nullptr, *d_src_to_tm = nullptr,
          *d_tgt_to_bm = nullptr, *d_tgt_to_tm = nullptr, *d_vidx = nullptr, *d_vlab = nullptr,
          *d_src_len = nullptr, *d_tgt_len = nullptr, *d_tokens = nullptr, *d_parents = nullptr,
          *d_dec_src_len = nullptr;
  std::vector<int32_t> h_src_tm, h_src_to_bm, h_src_to_tm, h_tgt_tm, h_tgt_to_bm, h_tgt_to_tm, vidx, vlab;
  uint64_t drop_seed = 0, drop_offset = 0;
  bool training = false;
  // Decoding. dec_values, dec_keys and d_dec_src_len: each sentence's encoder outputs, keys and
  // length, once (its beam's hypotheses read them in place), kept apart from what a train_batch
  // overwrites.
  int dec_batch = 0, dec_beam = 0, dec_rows = 0, dec_src_len = 0;
  float *dec_values = nullptr, *dec_keys = nullptr, *dec_emb = nullptr, *dec_qp = nullptr, *dec_probs = nullptr,
        *dec_cat = nullptr, *dec_acts = nullptr, *dec_y0 = nullptr, *dec_y1 = nullptr;
  std::vector<float> host_logits;

  float* floats(size_t n) { return buffers.floats(std::max<size_t>(n, 1)); }
  int32_t* ints(size_t n) { return reinterpret_cast<int32_t*>(floats(n)); }
  uint8_t* bytes(size_t n) { return reinterpret_cast<uint8_t*>(floats((n + 3) / 4)); }
  bool dropping() const { return training && spec.dropout > 0.0f; }

  Lstm lstm(ParamStore& s, const std::string& name, int in) {
    Lstm l;
    l.in = in;
    l.w_x = add_param(s, name + ".w_x", mul(in, 4 * Hd), ParamKind::weight);
    l.w_h = add_param(s, name + ".w_h", mul(Hd, 4 * Hd), ParamKind::weight);
    l.b = add_param(s, name + ".bias", size_t(4) * size_t(Hd), ParamKind::bias);
    return l;
  }

  AdditiveAttentionDims adims(int batch, int q_len, int k_len) const {
    AdditiveAttentionDims a;
    a.batch = batch;
    a.q_len = q_len;
    a.k_len = k_len;
    a.units = Hd;
    a.value_dim = Hd;
    return a;
  }

  void ready_views(size_t first, size_t end, const std::function<void(size_t)>& ready) const {
    if (!ready) return;
    for (size_t v = end; v > first; --v) ready(v - 1);
  }

  // ---- the LSTM over T steps of B rows, time-major ----
  // x [T*B, in]; writes acts [T*B, 4H], c [T*B, H] and h (row stride ld_h). reverse: t = T-1..0.
  void lstm_fwd(const ParamStore& s, const Lstm& l, const float* x, int T, int B, const int32_t* lengths,
                bool reverse, float* acts, float* c, float* h, int ld_h) {
    const int G = 4 * Hd;
    ops->linear_forward(x, T * B, l.in, G, param_ptr(s, l.w_x), param_ptr(s, l.b), gates);
    const float* W_h = param_ptr(s, l.w_h);
    for (int k = 0; k < T; ++k) {
      const int t = reverse ? T - 1 - k : k, tp = reverse ? t + 1 : t - 1;
      const float* h_prev = k == 0 ? zeros : h + mul(int64_t(tp) * B, ld_h);
      const int ld_prev = k == 0 ? Hd : ld_h;
      const float* c_prev = k == 0 ? zeros : c + mul(int64_t(tp) * B, Hd);
      float* g_t = gates + mul(int64_t(t) * B, G);
      if (k > 0) ops->gemm(false, false, B, G, Hd, 1.0f, h_prev, ld_prev, W_h, G, 1.0f, g_t, G);
      ops->lstm_cell_forward(g_t, c_prev, h_prev, ld_prev, B, Hd, lengths, t, acts + mul(int64_t(t) * B, G),
                             c + mul(int64_t(t) * B, Hd), h + mul(int64_t(t) * B, ld_h), ld_h);
    }
  }

  // Backward through time. dy [T*B, H] (contiguous): the gradient into h from above; it is used as
  // scratch (the recurrent gradient is added into it). dx [T*B, in] overwritten (nullable);
  // dW_x, dW_h, db accumulate.
  void lstm_bwd(ParamStore& s, const Lstm& l, const float* x, int T, int B, const int32_t* lengths, bool reverse,
                const float* acts, const float* c, const float* h, int ld_h, float* dy, float* dx) {
    const int G = 4 * Hd;
    const Device dev = spec.device;
    const size_t state = mul(B, Hd);
    zero_on(dev, dh_rec, state * sizeof(float));
    zero_on(dev, dc, state * sizeof(float));
    const float* W_h = param_ptr(s, l.w_h);
    float* dW_h = grad_ptr(s, l.w_h);
    for (int k = T - 1; k >= 0; --k) {
      const int t = reverse ? T - 1 - k : k, tp = reverse ? t + 1 : t - 1;
      const float* c_prev = k == 0 ? zeros : c + mul(int64_t(tp) * B, Hd);
      float* dy_t = dy + mul(int64_t(t) * B, Hd);
      float* dg_t = dgates + mul(int64_t(t) * B, G);
      ops->add_forward(dy_t, dh_rec, dy_t, state);
      ops->lstm_cell_backward(acts + mul(int64_t(t) * B, G), c_prev, c + mul(int64_t(t) * B, Hd), dy_t, Hd, dc, B,
                              Hd, lengths, t, dg_t, dc, dh_rec);
      if (k > 0) {
        const float* h_prev = h + mul(int64_t(tp) * B, ld_h);
        ops->gemm(false, true, B, Hd, G, 1.0f, dg_t, G, W_h, G, 1.0f, dh_rec, Hd);
        ops->gemm(true, false, Hd, G, B, 1.0f, h_prev, ld_h, dg_t, G, 1.0f, dW_h, G);
      }
    }
    ops->linear_backward(x, dgates, T * B, l.in, G, param_ptr(s, l.w_x), dx, grad_ptr(s, l.w_x), grad_ptr(s, l.b));
  }

  // The layer's input after dropout (training), saved in L.x.
  void layer_input(Layer& L, const float* src, int64_t rows) {
    const size_t count = mul(rows, L.in);
    if (dropping()) {
      ops->dropout_forward(src, count, spec.dropout, drop_seed, drop_offset, L.xd, L.mask);
      drop_offset += count;
      L.x = L.xd;
    } else {
      L.x = src;
    }
  }
  void layer_input_bwd(const Layer& L, float* dx, int64_t rows) const {
    if (dropping()) ops->dropout_backward(dx, L.mask, mul(rows, L.in), spec.dropout, dx);
  }

  // ---- host index arrays ----
  // Source tokens time-major and the permutations between [S, B] and [B, S] rows.
  // B sentences of S tokens (batch-major), and their lengths.
  void upload_source(const int32_t* src, const int32_t* lengths, int B, int S) {
    const size_t n = mul(B, S);
    h_src_tm.resize(n);
    h_src_to_bm.resize(n);
    h_src_to_tm.resize(n);
    for (int i = 0; i < B; ++i)
      for (int t = 0; t < S; ++t) {
        const size_t bm = size_t(i) * size_t(S) + size_t(t), tm = size_t(t) * size_t(B) + size_t(i);
        h_src_tm[tm] = src[bm];
        h_src_to_bm[bm] = static_cast<int32_t>(tm);
        h_src_to_tm[tm] = static_cast<int32_t>(bm);
      }
    const Device dev = spec.device;
    copy_to_device(dev, d_src_tm, h_src_tm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_src_to_bm, h_src_to_bm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_src_to_tm, h_src_to_tm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_src_len, lengths, size_t(B) * sizeof(int32_t));
  }

  void upload_target(const TranslationBatch& b) {
    const int B = b.batch, T = b.tgt_len;
    const size_t n = mul(B, T);
    h_tgt_tm.resize(n);
    h_tgt_to_bm.resize(n);
    h_tgt_to_tm.resize(n);
    vidx.clear();
    vlab.clear();
    for (int i = 0; i < B; ++i)
      for (int t = 0; t < T; ++t) {
        const size_t bm = size_t(i) * size_t(T) + size_t(t), tm = size_t(t) * size_t(B) + size_t(i);
        h_tgt_tm[tm] = b.tgt_in[bm];
        h_tgt_to_bm[bm] = static_cast<int32_t>(tm);
        h_tgt_to_tm[tm] = static_cast<int32_t>(bm);
        if (t < b.tgt_lengths[size_t(i)]) {
          vidx.push_back(static_cast<int32_t>(tm));
          vlab.push_back(b.tgt_out[bm]);
        }
      }
    const Device dev = spec.device;
    copy_to_device(dev, d_tgt_tm, h_tgt_tm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_tgt_to_bm, h_tgt_to_bm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_tgt_to_tm, h_tgt_to_tm.data(), n * sizeof(int32_t));
    copy_to_device(dev, d_tgt_len, b.tgt_lengths.data(), size_t(B) * sizeof(int32_t));
    copy_to_device(dev, d_vidx, vidx.data(), vidx.size() * sizeof(int32_t));
    copy_to_device(dev, d_vlab, vlab.data(), vlab.size() * sizeof(int32_t));
  }

  // ---- forward ----
  // Encoder over [B, S]: fills enc_bm [B*S, H] (batch-major outputs, the attention's values) and
  // keys = enc_bm W_k.
  void encoder_fwd(const ParamStore& s, int B, int S) {
    const int64_t rows = int64_t(B) * S;
    ops->embedding_gather(param_ptr(s, embedding), Hd, d_src_tm, static_cast<int>(rows), emb_src, Hd);
    const float* y = emb_src;
    for (Layer& L : enc) {
      layer_input(L, y, rows);
      if (L.bidir) {
        lstm_fwd(s, L.fwd, L.x, S, B, d_src_len, false, L.acts, L.c, L.h, 2 * Hd);
        lstm_fwd(s, L.bwd, L.x, S, B, d_src_len, true, L.acts_b, L.c_b, L.h + Hd, 2 * Hd);
      } else {
        lstm_fwd(s, L.fwd, L.x, S, B, d_src_len, false, L.acts, L.c, L.h, Hd);
        if (L.residual) ops->add_forward(L.h, y, L.out, mul(rows, Hd));
      }
      y = L.out;
    }
    ops->embedding_gather(y, Hd, d_src_to_bm, static_cast<int>(rows), enc_bm, Hd);
    ops->gemm(false, false, static_cast<int>(rows), Hd, Hd, 1.0f, enc_bm, Hd, param_ptr(s, w_k), Hd, 0.0f, keys, Hd);
  }

  // Decoder over [B, T] (teacher forcing); returns the last layer's output [T*B, H] (time-major).
  const float* decoder_fwd(const ParamStore& s, int B, int T, int S) {
    const int64_t rows = int64_t(B) * T;
    const int n = static_cast<int>(rows);
    ops->embedding_gather(param_ptr(s, embedding), Hd, d_tgt_tm, n, emb_tgt, Hd);
    Layer& L0 = dec[0];
    layer_input(L0, emb_tgt, rows);
    lstm_fwd(s, L0.fwd, L0.x, T, B, d_tgt_len, false, L0.acts, L0.c, L0.h, Hd);
    // Attention: queries are layer 0's outputs, one context per target step.
    ops->embedding_gather(L0.h, Hd, d_tgt_to_bm, n, q_bm, Hd);
    ops->gemm(false, false, n, Hd, Hd, 1.0f, q_bm, Hd, param_ptr(s, w_q), Hd, 0.0f, qp, Hd);
    ops->additive_attention_forward(adims(B, T, S), qp, keys, param_ptr(s, att_bias), param_ptr(s, att_v),
                                    param_ptr(s, att_g), enc_bm, d_src_len, probs, ctx_bm, Hd);
    ops->embedding_gather(ctx_bm, Hd, d_tgt_to_tm, n, ctx_tm, Hd);
    const float* y = L0.h;
    for (size_t i = 1; i < dec.size(); ++i) {
      Layer& L = dec[i];
      ops->copy_rows(y, Hd, n, Hd, L.cat, 2 * Hd);
      ops->copy_rows(ctx_tm, Hd, n, Hd, L.cat + Hd, 2 * Hd);
      layer_input(L, L.cat, rows);
      lstm_fwd(s, L.fwd, L.x, T, B, d_tgt_len, false, L.acts, L.c, L.h, Hd);
      if (L.residual) ops->add_forward(L.h, y, L.out, mul(rows, Hd));
      y = L.out;
    }
    return y;
  }

  void train_batch(ParamStore& s, const TranslationBatch& b, float grad_scale, uint64_t dropout_seed,
                   double* loss_sum, const std::function<void(size_t)>& ready) override {
    const int B = b.batch, S = b.src_len, T = b.tgt_len;
    MLPD_CHECK(B >= 1 && B <= spec.limits.max_batch && S >= 1 && S <= spec.limits.max_src_len && T >= 1 &&
                   T <= spec.limits.max_tgt_len,
               "gnmt batch larger than the model was built for");
    training = true;
    drop_seed = dropout_seed;
    drop_offset = 0;
    const Device dev = spec.device;
    upload_source(b.src.data(), b.src_lengths.data(), B, S);
    upload_target(b);
    const int N = static_cast<int>(vidx.size());
    const int64_t rows_s = int64_t(B) * S, rows_t = int64_t(B) * T;
    const int ns = static_cast<int>(rows_s), nt = static_cast<int>(rows_t);

    encoder_fwd(s, B, S);
    const float* y = decoder_fwd(s, B, T, S);
    // Classifier over the valid target rows only.
    ops->embedding_gather(y, Hd, d_vidx, N, yv, Hd);
    ops->linear_forward(yv, N, Hd, V, param_ptr(s, cls_w), param_ptr(s, cls_b), logits);
    ops->softmax_xent(logits, d_vlab, N, V, spec.label_smoothing, grad_scale, dlogits, loss_sum, nullptr);
    ops->linear_backward(yv, dlogits, N, Hd, V, param_ptr(s, cls_w), dyv, grad_ptr(s, cls_w), grad_ptr(s, cls_b));
    ready_views(cls_w, end_view, ready);
    zero_on(dev, g_y, mul(rows_t, Hd) * sizeof(float));
    ops->embedding_scatter_add(g_y, Hd, d_vidx, N, dyv, Hd);

    // Decoder layers >= 1: g_y is the gradient of the layer's output; g_ctx collects the context's.
    zero_on(dev, g_ctx, mul(rows_t, Hd) * sizeof(float));
    for (size_t i = dec.size(); i-- > 1;) {
      Layer& L = dec[i];
      float* dy = g_y;
      if (L.residual) {  // the residual's gradient (g_y) is still needed after the LSTM's backward
        copy_within(dev, g_h, g_y, mul(rows_t, Hd) * sizeof(float));
        dy = g_h;
      }
      lstm_bwd(s, L.fwd, L.x, T, B, d_tgt_len, false, L.acts, L.c, L.h, Hd, dy, g_x);
      layer_input_bwd(L, g_x, rows_t);
      ops->copy_rows(g_x + Hd, 2 * Hd, nt, Hd, g_tmp, Hd);
      ops->add_forward(g_ctx, g_tmp, g_ctx, mul(rows_t, Hd));
      if (L.residual) {
        ops->copy_rows(g_x, 2 * Hd, nt, Hd, g_tmp, Hd);
        ops->add_forward(g_y, g_tmp, g_y, mul(rows_t, Hd));
      } else {
        ops->copy_rows(g_x, 2 * Hd, nt, Hd, g_y, Hd);
      }
      ready_views(L.first_view, L.end_view, ready);
    }
    // Attention: into the queries (layer 0's outputs), the keys and the values (encoder outputs).
    ops->embedding_gather(g_ctx, Hd, d_tgt_to_bm, nt, g_ctx_bm, Hd);
    ops->additive_attention_backward(adims(B, T, S), qp, keys, param_ptr(s, att_bias), param_ptr(s, att_v),
                                     param_ptr(s, att_g), enc_bm, d_src_len, probs, g_ctx_bm, Hd, g_qp, g_keys,
                                     g_enc_bm, grad_ptr(s, att_bias), grad_ptr(s, att_v), grad_ptr(s, att_g));
    ops->gemm(true, false, Hd, Hd, nt, 1.0f, q_bm, Hd, g_qp, Hd, 1.0f, grad_ptr(s, w_q), Hd);
    ops->gemm(false, true, nt, Hd, Hd, 1.0f, g_qp, Hd, param_ptr(s, w_q), Hd, 0.0f, g_q_bm, Hd);
    ops->gemm(true, false, Hd, Hd, ns, 1.0f, enc_bm, Hd, g_keys, Hd, 1.0f, grad_ptr(s, w_k), Hd);
    ops->gemm(false, true, ns, Hd, Hd, 1.0f, g_keys, Hd, param_ptr(s, w_k), Hd, 1.0f, g_enc_bm, Hd);
    ready_views(att_first, att_end, ready);
    ops->embedding_gather(g_q_bm, Hd, d_tgt_to_tm, nt, g_tmp, Hd);
    ops->add_forward(g_y, g_tmp, g_y, mul(rows_t, Hd));
    // Decoder layer 0, then its input into the shared embedding.
    {
      Layer& L = dec[0];
      lstm_bwd(s, L.fwd, L.x, T, B, d_tgt_len, false, L.acts, L.c, L.h, Hd, g_y, g_x);
      layer_input_bwd(L, g_x, rows_t);
      ops->embedding_scatter_add(grad_ptr(s, embedding), Hd, d_tgt_tm, nt, g_x, Hd);
      ready_views(L.first_view, L.end_view, ready);
    }

    // Encoder, top down. g_y: the gradient of the layer's output [rows, H]; below layer 1 it is g_x
    // [rows, 2H] (the bidirectional layer's output).
    ops->embedding_gather(g_enc_bm, Hd, d_src_to_tm, ns, g_y, Hd);
    for (size_t i = enc.size(); i-- > 0;) {
      Layer& L = enc[i];
      if (L.bidir) {
        ops->copy_rows(g_x, 2 * Hd, ns, Hd, g_h, Hd);
        ops->copy_rows(g_x + Hd, 2 * Hd, ns, Hd, g_tmp, Hd);
        lstm_bwd(s, L.fwd, L.x, S, B, d_src_len, false, L.acts, L.c, L.h, 2 * Hd, g_h, g_y);
        lstm_bwd(s, L.bwd, L.x, S, B, d_src_len, true, L.acts_b, L.c_b, L.h + Hd, 2 * Hd, g_tmp, g_x);
        ops->add_forward(g_y, g_x, g_y, mul(rows_s, Hd));
        layer_input_bwd(L, g_y, rows_s);
        ops->embedding_scatter_add(grad_ptr(s, embedding), Hd, d_src_tm, ns, g_y, Hd);
      } else if (L.residual) {
        copy_within(dev, g_h, g_y, mul(rows_s, Hd) * sizeof(float));
        lstm_bwd(s, L.fwd, L.x, S, B, d_src_len, false, L.acts, L.c, L.h, Hd, g_h, g_x);
        layer_input_bwd(L, g_x, rows_s);
        ops->add_forward(g_y, g_x, g_y, mul(rows_s, Hd));
      } else {  // layer 1: its input gradient [rows, 2H] goes to the bidirectional layer in g_x
        lstm_bwd(s, L.fwd, L.x, S, B, d_src_len, false, L.acts, L.c, L.h, Hd, g_y, g_x);
        layer_input_bwd(L, g_x, rows_s);
      }
      ready_views(L.first_view, L.end_view, ready);
    }
    if (ready) ready(embedding);
    training = false;
  }

  // ---- decoding ----
  void begin_decode(const ParamStore& s, const TranslationBatch& b, int beam) override {
    const int B = b.batch, S = b.src_len;
    MLPD_CHECK(B >= 1 && B <= spec.limits.max_eval_batch && S >= 1 && S <= spec.limits.max_src_len && beam >= 1 &&
                   beam <= spec.limits.max_beam,
               "gnmt decode batch larger than the model was built for");
    training = false;
    const Device dev = spec.device;
    // The encoder takes at most a training batch of sentences at a time: its buffers hold what
    // backward reads, sized for training, not for the (larger) eval batch. Each chunk's outputs go
    // to the decode's values and keys of its sentences.
    const int chunk = spec.limits.max_batch;
    for (int first = 0; first < B; first += chunk) {
      const int n = std::min(chunk, B - first);
      upload_source(b.src.data() + mul(first, S), b.src_lengths.data() + first, n, S);
      encoder_fwd(s, n, S);
      copy_within(dev, dec_values + mul(first, S) * Hd, enc_bm, mul(n, S) * Hd * sizeof(float));
      copy_within(dev, dec_keys + mul(first, S) * Hd, keys, mul(n, S) * Hd * sizeof(float));
    }
    dec_batch = B;
    dec_beam = beam;
    dec_rows = B * beam;
    dec_src_len = S;
    copy_to_device(dev, d_dec_src_len, b.src_lengths.data(), size_t(B) * sizeof(int32_t));
    for (Layer& L : dec) {
      zero_on(dev, L.st_h, mul(dec_rows, Hd) * sizeof(float));
      zero_on(dev, L.st_c, mul(dec_rows, Hd) * sizeof(float));
    }
  }

  // One step of one decoder layer for every hypothesis: input x [rows, in], state st -> nx, swapped.
  void step_layer(const ParamStore& s, Layer& L, const float* x, int rows) {
    const int G = 4 * Hd;
    ops->linear_forward(x, rows, L.in, G, param_ptr(s, L.fwd.w_x), param_ptr(s, L.fwd.b), gates);
    ops->gemm(false, false, rows, G, Hd, 1.0f, L.st_h, Hd, param_ptr(s, L.fwd.w_h), G, 1.0f, gates, G);
    ops->lstm_cell_forward(gates, L.st_c, L.st_h, Hd, rows, Hd, nullptr, 0, dec_acts, L.nx_c, L.nx_h, Hd);
    std::swap(L.st_h, L.nx_h);
    std::swap(L.st_c, L.nx_c);
  }

  void decode_step(const ParamStore& s, int step, const int32_t* last_tokens, const int32_t* parents, int rows,
                   float* log_probs) override {
    MLPD_CHECK(rows == dec_rows && rows >= 1, "gnmt decode step: rows differ from begin_decode's");
    const Device dev = spec.device;
    if (step > 0) {
      bool identity = true;
      for (int r = 0; r < rows; ++r) identity = identity && parents[r] == r;
      if (!identity) {
        copy_to_device(dev, d_parents, parents, size_t(rows) * sizeof(int32_t));
        for (Layer& L : dec) {
          ops->embedding_gather(L.st_h, Hd, d_parents, rows, L.nx_h, Hd);
          ops->embedding_gather(L.st_c, Hd, d_parents, rows, L.nx_c, Hd);
          std::swap(L.st_h, L.nx_h);
          std::swap(L.st_c, L.nx_c);
        }
      }
    }
    copy_to_device(dev, d_tokens, last_tokens, size_t(rows) * sizeof(int32_t));
    ops->embedding_gather(param_ptr(s, embedding), Hd, d_tokens, rows, dec_emb, Hd);
    step_layer(s, dec[0], dec_emb, rows);
    // Attention with one query per hypothesis: a sentence's beam are its queries over its encoder
    // outputs (each row is summed alone: the same bits as a row per hypothesis); the context lands
    // in the concat's second half.
    ops->gemm(false, false, rows, Hd, Hd, 1.0f, dec[0].st_h, Hd, param_ptr(s, w_q), Hd, 0.0f, dec_qp, Hd);
    ops->additive_attention_forward(adims(dec_batch, dec_beam, dec_src_len), dec_qp, dec_keys,
                                    param_ptr(s, att_bias), param_ptr(s, att_v), param_ptr(s, att_g), dec_values,
                                    d_dec_src_len, dec_probs, dec_cat + Hd, 2 * Hd);
    const float* y = dec[0].st_h;
    float* next = dec_y0;
    for (size_t i = 1; i < dec.size(); ++i) {
      Layer& L = dec[i];
      ops->copy_rows(y, Hd, rows, Hd, dec_cat, 2 * Hd);
      step_layer(s, L, dec_cat, rows);
      if (L.residual) {
        ops->add_forward(L.st_h, y, next, mul(rows, Hd));
        y = next;
        next = next == dec_y0 ? dec_y1 : dec_y0;
      } else {
        y = L.st_h;
      }
    }
    ops->linear_forward(y, rows, Hd, V, param_ptr(s, cls_w), param_ptr(s, cls_b), logits);
    const float* host = logits;
    if (dev != Device::cpu) {
      host_logits.resize(mul(rows, V));
      copy_to_host(dev, host_logits.data(), logits, host_logits.size() * sizeof(float));
      host = host_logits.data();
    }
    log_softmax_rows(host, rows, V, log_probs);
  }

  // ---- bookkeeping ----
  void init_parameters(ParamStore& s, uint64_t seed) const override {
    MLPD_CHECK(!on_device(s), "init_parameters writes the host buffers: call it before place_store_on");
    for (size_t v = first_view; v < end_view; ++v) {
      float* p = s.params.data() + s.views[v].offset;
      const size_t n = s.views[v].count;
      if (v == att_bias) {
        std::fill(p, p + n, 0.0f);
      } else if (v == att_g) {
        std::fill(p, p + n, 1.0f / std::sqrt(static_cast<float>(Hd)));
      } else {
        Rng r{seed, 1 + v - first_view};
        for (size_t i = 0; i < n; ++i) p[i] = kInitBound * (2.0f * r.uniform() - 1.0f);
      }
    }
    float* pad = s.params.data() + s.views[embedding].offset + size_t(kPadToken) * size_t(Hd);
    std::fill(pad, pad + Hd, 0.0f);
  }

  size_t activation_bytes() const override { return buffers.bytes; }
  std::string summary(const ParamStore& s) const override {
    return "GNMT hidden " + std::to_string(Hd) + ", " + std::to_string(enc.size()) + "+" +
           std::to_string(dec.size()) +
           " LSTM layers (bidirectional first encoder layer, residuals from the third), normalized Bahdanau "
           "attention, shared " +
           std::to_string(V) + "-token embedding, dropout " + std::to_string(spec.dropout).substr(0, 4) + ", " +
           std::to_string(s.param_count) + " parameters";
  }

  // GEMM FLOPs only (the attention's tanh terms and the cells' pointwise work are left out).
  double train_flops_per_token() const override {
    const double h = Hd, vv = V;
    auto lstm_flops = [h](double in) { return 2.0 * 4.0 * h * (in + h); };  // per token and direction
    double enc_token = 2.0 * lstm_flops(h) + 2.0 * h * h;                   // bidirectional layer, W_k
    for (size_t i = 1; i < enc.size(); ++i) enc_token += lstm_flops(i == 1 ? 2.0 * h : h);
    double dec_token = lstm_flops(h) + 2.0 * h * h + 2.0 * h * vv;  // layer 0, W_q, classifier
    for (size_t i = 1; i < dec.size(); ++i) dec_token += lstm_flops(2.0 * h);
    return 3.0 * (enc_token + dec_token) / 2.0;  // source and target tokens about equal
  }
};

}  // namespace

std::unique_ptr<Seq2Seq> build_gnmt(const GnmtSpec& spec, ParamStore& store) {
  check_seq2seq_spec("gnmt", spec.vocab, spec.limits, spec.dropout);
  const Seq2SeqLimits& lim = spec.limits;
  if (spec.hidden < 1) throw UserError("gnmt: hidden must be positive", 2);
  if (spec.encoder_layers < 2 || spec.decoder_layers < 2)
    throw UserError("gnmt: encoder_layers and decoder_layers must be at least 2", 2);
  auto m = std::make_unique<Gnmt>();
  Gnmt& g = *m;
  g.spec = spec;
  g.ops = &ops_for(spec.device, spec.precision);
  g.buffers.device = spec.device;
  g.Hd = spec.hidden;
  g.V = spec.vocab;
  const int H = g.Hd;

  // Views, in the order backward finishes them reversed.
  g.first_view = store.views.size();
  g.embedding = add_param(store, "shared_embedding", mul(g.V, H), ParamKind::weight);
  for (int l = 0; l < spec.encoder_layers; ++l) {
    const std::string n = "encoder" + std::to_string(l);
    Layer L;
    L.first_view = store.views.size();
    L.bidir = l == 0;
    L.residual = l >= 2;
    L.in = l == 1 ? 2 * H : H;
    if (L.bidir) {
      L.fwd = g.lstm(store, n + ".forward", L.in);
      L.bwd = g.lstm(store, n + ".backward", L.in);
    } else {
      L.fwd = g.lstm(store, n, L.in);
    }
    L.end_view = store.views.size();
    g.enc.push_back(L);
  }
  for (int l = 0; l < spec.decoder_layers; ++l) {
    const std::string n = "decoder" + std::to_string(l);
    Layer L;
    L.first_view = store.views.size();
    L.residual = l >= 2;
    L.in = l == 0 ? H : 2 * H;
    L.fwd = g.lstm(store, n, L.in);
    L.end_view = store.views.size();
    g.dec.push_back(L);
    if (l == 0) {
      g.att_first = store.views.size();
      g.w_q = add_param(store, "attention.w_q", mul(H, H), ParamKind::weight);
      g.w_k = add_param(store, "attention.w_k", mul(H, H), ParamKind::weight);
      g.att_bias = add_param(store, "attention.bias", size_t(H), ParamKind::bias);
      g.att_v = add_param(store, "attention.v", size_t(H), ParamKind::weight);
      g.att_g = add_param(store, "attention.g", 1, ParamKind::bias);
      g.att_end = store.views.size();
    }
  }
  g.cls_w = add_param(store, "classifier.weight", mul(H, g.V), ParamKind::weight);
  g.cls_b = add_param(store, "classifier.bias", size_t(g.V), ParamKind::bias);
  g.end_view = store.views.size();

  // Buffers, sized for the largest training batch and the largest decode batch.
  const int B = lim.max_batch, S = lim.max_src_len, T = lim.max_tgt_len;
  const int rows_dec = lim.max_eval_batch * lim.max_beam;
  const int64_t rs = int64_t(B) * S, rt = int64_t(B) * T;  // the encoder runs a decode batch in chunks of B
  const int64_t rmax = std::max({rs, rt, int64_t(rows_dec)});
  const int64_t state_rows = std::max(int64_t(B), int64_t(rows_dec));  // encoder chunks, hypotheses
  const bool drop = spec.dropout > 0.0f;
  for (Layer& L : g.enc) {
    if (drop) {
      L.xd = g.floats(mul(rs, L.in));
      L.mask = g.bytes(mul(rs, L.in));
    }
    L.h = g.floats(mul(rs, L.bidir ? 2 * H : H));
    L.c = g.floats(mul(rs, H));
    L.acts = g.floats(mul(rs, 4 * H));
    if (L.bidir) {
      L.c_b = g.floats(mul(rs, H));
      L.acts_b = g.floats(mul(rs, 4 * H));
    }
    L.out = L.residual ? g.floats(mul(rs, H)) : L.h;
  }
  for (size_t l = 0; l < g.dec.size(); ++l) {
    Layer& L = g.dec[l];
    if (drop) {
      L.xd = g.floats(mul(rt, L.in));
      L.mask = g.bytes(mul(rt, L.in));
    }
    if (l >= 1) L.cat = g.floats(mul(rt, 2 * H));
    L.h = g.floats(mul(rt, H));
    L.c = g.floats(mul(rt, H));
    L.acts = g.floats(mul(rt, 4 * H));
    L.out = L.residual ? g.floats(mul(rt, H)) : L.h;
    L.st_h = g.floats(mul(rows_dec, H));
    L.st_c = g.floats(mul(rows_dec, H));
    L.nx_h = g.floats(mul(rows_dec, H));
    L.nx_c = g.floats(mul(rows_dec, H));
  }
  g.emb_src = g.floats(mul(rs, H));
  g.emb_tgt = g.floats(mul(rt, H));
  g.enc_bm = g.floats(mul(rs, H));
  g.keys = g.floats(mul(rs, H));
  g.q_bm = g.floats(mul(rt, H));
  g.qp = g.floats(mul(rt, H));
  g.probs = g.floats(mul(rt, S));
  g.ctx_bm = g.floats(mul(rt, H));
  g.ctx_tm = g.floats(mul(rt, H));
  g.yv = g.floats(mul(rt, H));
  g.logits = g.floats(mul(std::max<int64_t>(rt, rows_dec), g.V));
  g.dlogits = g.logits;  // softmax_xent writes the gradient over the logits, which nothing reads after
  g.dyv = g.floats(mul(rt, H));
  g.gates = g.floats(mul(rmax, 4 * H));
  g.dgates = g.floats(mul(std::max(rs, rt), 4 * H));
  g.zeros = g.floats(mul(state_rows, H));
  g.g_y = g.floats(mul(rmax, H));
  g.g_h = g.floats(mul(rmax, H));
  g.g_x = g.floats(mul(rmax, 2 * H));
  g.g_tmp = g.floats(mul(rmax, H));
  g.g_ctx = g.floats(mul(rt, H));
  g.g_ctx_bm = g.floats(mul(rt, H));
  g.g_qp = g.floats(mul(rt, H));
  g.g_q_bm = g.floats(mul(rt, H));
  g.g_keys = g.floats(mul(rs, H));
  g.g_enc_bm = g.floats(mul(rs, H));
  g.dh_rec = g.floats(mul(B, H));
  g.dc = g.floats(mul(B, H));
  g.d_src_tm = g.ints(size_t(rs));
  g.d_src_to_bm = g.ints(size_t(rs));
  g.d_src_to_tm = g.ints(size_t(rs));
  g.d_src_len = g.ints(size_t(B));  // an encoder chunk's lengths
  g.d_tgt_tm = g.ints(size_t(rt));
  g.d_tgt_to_bm = g.ints(size_t(rt));
  g.d_tgt_to_tm = g.ints(size_t(rt));
  g.d_tgt_len = g.ints(size_t(B));
  g.d_vidx = g.ints(size_t(rt));
  g.d_vlab = g.ints(size_t(rt));
  g.d_tokens = g.ints(size_t(rows_dec));
  g.d_parents = g.ints(size_t(rows_dec));
  g.d_dec_src_len = g.ints(size_t(lim.max_eval_batch));
  g.dec_values = g.floats(mul(int64_t(lim.max_eval_batch) * S, H));
  g.dec_keys = g.floats(mul(int64_t(lim.max_eval_batch) * S, H));
  g.dec_emb = g.floats(mul(rows_dec, H));
  g.dec_qp = g.floats(mul(rows_dec, H));
  g.dec_probs = g.floats(mul(rows_dec, S));
  g.dec_cat = g.floats(mul(rows_dec, 2 * H));
  g.dec_acts = g.floats(mul(rows_dec, 4 * H));
  g.dec_y0 = g.floats(mul(rows_dec, H));
  g.dec_y1 = g.floats(mul(rows_dec, H));
  g.vidx.reserve(size_t(rt));
  g.vlab.reserve(size_t(rt));
  return m;
}

}  // namespace mlpd
