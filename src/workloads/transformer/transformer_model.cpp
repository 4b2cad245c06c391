#include "workloads/transformer/transformer_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/op_table.h"

namespace mlpd {

namespace {

struct Linear {
  size_t w = 0, b = 0;
  int in = 0, out = 0;
};
struct Norm {
  size_t gamma = 0, beta = 0;
};

struct EncoderLayer {
  Linear qkv, out, ffn1, ffn2;
  Norm ln1, ln2;
  size_t first_view = 0, end_view = 0;  // [first, end) of this layer's views
  // Saved for backward, [rows, width] each (rows = batch * source length).
  float *qkv_act = nullptr, *probs = nullptr, *attn = nullptr, *r1 = nullptr, *x1 = nullptr, *m1 = nullptr,
        *i1 = nullptr, *h = nullptr, *r2 = nullptr, *x2 = nullptr, *m2 = nullptr, *i2 = nullptr;
  uint8_t *mask1 = nullptr, *mask2 = nullptr;
  // bf16 storage (Transformer::bf16_storage): qkv_act, attn and h as bf16; those three are then null.
  uint16_t *qkv16 = nullptr, *attn16 = nullptr, *h16 = nullptr;
};

struct DecoderLayer {
  Linear qkv, out, q, kv, cross_out, ffn1, ffn2;
  Norm ln1, ln2, ln3;
  size_t first_view = 0, end_view = 0;
  float *qkv_act = nullptr, *probs = nullptr, *attn = nullptr, *r1 = nullptr, *y1 = nullptr, *m1 = nullptr,
        *i1 = nullptr;
  float *q_act = nullptr, *kv_act = nullptr, *cross_probs = nullptr, *cross_attn = nullptr, *r2 = nullptr,
        *y2 = nullptr, *m2 = nullptr, *i2 = nullptr;
  float *h = nullptr, *r3 = nullptr, *y3 = nullptr, *m3 = nullptr, *i3 = nullptr;
  uint8_t *mask1 = nullptr, *mask2 = nullptr, *mask3 = nullptr;
  // bf16 storage: qkv_act, attn, q_act, kv_act, cross_attn and h as bf16; those six are then null.
  uint16_t *qkv16 = nullptr, *attn16 = nullptr, *q16 = nullptr, *kv16 = nullptr, *cross_attn16 = nullptr,
           *h16 = nullptr;
  // Decoding: the cross-attention keys and values of each source sentence (its hypotheses read
  // them in place), and the self-attention cache of past positions (reordered by the beam's
  // parents each step: Transformer's spare_cache). Under bf16 storage both hold bf16 bits (they
  // are the bf16 table's GEMM outputs, so nothing is lost; attention_forward_bf16_kv reads them)
  // and the fp32 pointers stay null.
  float *cross_kv = nullptr, *cache = nullptr;
  uint16_t *cross_kv16 = nullptr, *cache16 = nullptr;
};

constexpr float kLayerNormEps = 1e-5f;

size_t mul(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

struct Transformer final : Seq2Seq {
  TransformerSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  size_t embedding = 0;
  std::vector<EncoderLayer> enc;
  std::vector<DecoderLayer> dec;
  int d = 0, H = 0, F = 0, V = 0;
  int64_t rows_src = 0, rows_tgt = 0;  // largest row counts (training and eval encoders)
  float* x0 = nullptr;                 // encoder input after embedding (+dropout)
  float* y0 = nullptr;                 // decoder input
  uint8_t *x0_mask = nullptr, *y0_mask = nullptr;
  float* scratch = nullptr;            // pre-dropout sublayer outputs, [rows, max(d, F)]
  // bf16 storage (--precision bf16): what a layer saves for backward and is either a GEMM's output
  // (rounded to bf16 by the bf16 table: q, k, v, and the feed-forward hidden layer after its ReLU)
  // or read only by a GEMM (which rounds it: the attention outputs) is kept as bf16, losing no
  // bit. A layer computes it in these shared fp32 buffers, keeps the bf16 copy, and widens that back
  // into them for backward. (The beam search's buffers are the same ones: it runs after the encoder.)
  bool bf16_storage = false;
  float *w_qkv = nullptr, *w_attn = nullptr, *w_h = nullptr, *w_q = nullptr, *w_kv = nullptr;
  float *logits = nullptr, *dlogits = nullptr, *yv = nullptr, *dyv = nullptr;
  // Backward scratch.
  float *g_y = nullptr, *g_r = nullptr, *g_sub = nullptr, *g_x = nullptr, *g_wide = nullptr, *g_kv = nullptr,
        *g_enc = nullptr, *g_enc_tmp = nullptr;
  // Token and length arrays on the device (host pointers on the CPU build use the same buffers).
  int32_t *d_src = nullptr, *d_src_len = nullptr, *d_tgt_in = nullptr, *d_tgt_len = nullptr, *d_vidx = nullptr,
          *d_vlab = nullptr, *d_tokens = nullptr, *d_self_len = nullptr;
  int32_t* d_dec_src_len = nullptr;  // the decoded sentences' lengths (a train_batch overwrites d_src_len)
  std::vector<int32_t> vidx, vlab;
  uint64_t drop_seed = 0, drop_offset = 0;
  bool training = false;
  // Decoding state.
  int dec_batch = 0, dec_beam = 0, dec_rows = 0, dec_src_len = 0, dec_cache_len = 0;
  float *dec_y = nullptr, *dec_qkv = nullptr, *dec_probs = nullptr, *dec_attn = nullptr, *dec_sub = nullptr,
        *dec_r = nullptr, *dec_y1 = nullptr, *dec_mean = nullptr, *dec_inv = nullptr, *dec_h = nullptr;
  // Where the beam's reorder gathers a layer's cache, which then becomes the spare: one buffer for
  // all layers, not one each (a cache is rows x max decode length x 2d floats).
  float* spare_cache = nullptr;
  uint16_t* spare_cache16 = nullptr;
  std::vector<float> host_logits;
  std::vector<int32_t> host_lens;

  float* floats(size_t n) { return buffers.floats(std::max<size_t>(n, 1)); }
  // A buffer of bf16 values (a saved activation, a decode cache): fp32, or under bf16 storage bf16
  // (the fp32 pointer stays null).
  void saved_buffer(size_t n, float*& own, uint16_t*& kept) {
    if (bf16_storage)
      kept = buffers.halves(std::max<size_t>(n, 1));
    else
      own = floats(n);
  }
  int32_t* ints(size_t n) { return reinterpret_cast<int32_t*>(floats(n)); }
  uint8_t* bytes(size_t n) { return reinterpret_cast<uint8_t*>(floats((n + 3) / 4)); }

  Linear linear(ParamStore& s, const std::string& name, int in, int out) {
    Linear l;
    l.in = in;
    l.out = out;
    l.w = add_param(s, name + ".weight", mul(in, out), ParamKind::weight);
    l.b = add_param(s, name + ".bias", static_cast<size_t>(out), ParamKind::bias);
    return l;
  }
  Norm norm(ParamStore& s, const std::string& name) {
    return {add_param(s, name + ".gamma", static_cast<size_t>(d), ParamKind::bias),
            add_param(s, name + ".beta", static_cast<size_t>(d), ParamKind::bias)};
  }

  // A saved activation is written to the layer's own fp32 buffer, or under bf16 storage to the
  // shared one, from which keep() packs its bf16 copy.
  float* target(float* own, float* shared) const { return bf16_storage ? shared : own; }
  void keep(const float* x, int64_t rows, int width, uint16_t* x16) const {
    if (bf16_storage) ops->bf16_pack_rows(x, static_cast<int>(rows), width, width, x16, width);
  }
  // The saved activation for backward: the layer's own buffer, or its bf16 copy widened.
  const float* saved(const float* own, const uint16_t* x16, float* shared, int64_t rows, int width) const {
    if (!bf16_storage) return own;
    ops->bf16_unpack_rows(x16, static_cast<int>(rows), width, width, shared, width);
    return shared;
  }

  // ---- forward pieces ----
  void linear_fwd(const ParamStore& s, const Linear& l, const float* x, int64_t rows, float* y) const {
    ops->linear_forward(x, static_cast<int>(rows), l.in, l.out, param_ptr(s, l.w), param_ptr(s, l.b), y);
  }
  void linear_bwd(ParamStore& s, const Linear& l, const float* x, const float* dy, int64_t rows, float* dx) const {
    ops->linear_backward(x, dy, static_cast<int>(rows), l.in, l.out, param_ptr(s, l.w), dx, grad_ptr(s, l.w),
                         grad_ptr(s, l.b));
  }
  // r = x + dropout(sub); y = LayerNorm(r). Without training, no dropout (mask unused).
  void residual_norm_fwd(const ParamStore& s, const Norm& n, const float* x, const float* sub, int64_t rows,
                         uint8_t* mask, float* r, float* y, float* mean, float* inv) {
    const size_t count = mul(rows, d);
    if (training && spec.dropout > 0.0f) {
      ops->dropout_forward(sub, count, spec.dropout, drop_seed, drop_offset, r, mask);
      drop_offset += count;
      ops->add_forward(x, r, r, count);
    } else {
      ops->add_forward(x, sub, r, count);
    }
    ops->layernorm_forward(r, rows, d, param_ptr(s, n.gamma), param_ptr(s, n.beta), kLayerNormEps, y, mean, inv);
  }
  // From dy (gradient of y): g_r = gradient of r (= of x through the residual), g_sub = of sub.
  void residual_norm_bwd(ParamStore& s, const Norm& n, const float* r, const float* dy, int64_t rows,
                         const uint8_t* mask, const float* mean, const float* inv, float* dr, float* dsub) {
    ops->layernorm_backward(r, dy, rows, d, param_ptr(s, n.gamma), mean, inv, dr, grad_ptr(s, n.gamma),
                            grad_ptr(s, n.beta), false);
    const size_t count = mul(rows, d);
    if (training && spec.dropout > 0.0f)
      ops->dropout_backward(dr, mask, count, spec.dropout, dsub);
    else
      copy_within(spec.device, dsub, dr, count * sizeof(float));
  }
  void embed(const ParamStore& s, const int32_t* tokens, int batch, int len, int pos_offset, uint8_t* mask,
             float* out) {
    const size_t count = mul(batch, len) * static_cast<size_t>(d);
    const float scale = std::sqrt(static_cast<float>(d));
    if (training && spec.dropout > 0.0f) {
      ops->token_embedding_forward(param_ptr(s, embedding), d, tokens, batch, len, scale, pos_offset, true, scratch);
      ops->dropout_forward(scratch, count, spec.dropout, drop_seed, drop_offset, out, mask);
      drop_offset += count;
    } else {
      ops->token_embedding_forward(param_ptr(s, embedding), d, tokens, batch, len, scale, pos_offset, true, out);
    }
  }
  AttentionDims dims(int batch, int q_len, int k_len, bool causal) const {
    AttentionDims a;
    a.batch = batch;
    a.heads = H;
    a.q_len = q_len;
    a.k_len = k_len;
    a.head_dim = d / H;
    a.causal = causal;
    return a;
  }

  // The sublayers both layer kinds have, into `scratch` (before dropout and the residual).
  template <class Layer>
  void self_attention_fwd(const ParamStore& s, Layer& L, const float* x, int64_t rows, const AttentionDims& a,
                          const int32_t* lengths) {
    float *qkv = target(L.qkv_act, w_qkv), *attn = target(L.attn, w_attn);
    linear_fwd(s, L.qkv, x, rows, qkv);
    ops->attention_forward(a, qkv, 3 * d, qkv + d, 3 * d, qkv + 2 * d, 3 * d, lengths, L.probs, attn, d);
    keep(qkv, rows, 3 * d, L.qkv16);
    keep(attn, rows, d, L.attn16);
    linear_fwd(s, L.out, attn, rows, scratch);
  }
  template <class Layer>
  void feed_forward_fwd(const ParamStore& s, Layer& L, const float* x, int64_t rows) {
    float* h = target(L.h, w_h);
    linear_fwd(s, L.ffn1, x, rows, h);
    ops->relu_forward(h, h, mul(rows, F));
    keep(h, rows, F, L.h16);
    linear_fwd(s, L.ffn2, h, rows, scratch);
  }
  // Their backward from g_sub (the gradient at the sublayer's output); the input's gradient goes
  // to g_x (feed-forward) or g_sub (self-attention, as the fused attention wants g_x for itself).
  template <class Layer>
  void feed_forward_bwd(ParamStore& s, Layer& L, const float* x, int64_t rows) {
    const float* h = saved(L.h, L.h16, w_h, rows, F);
    linear_bwd(s, L.ffn2, h, g_sub, rows, g_wide);
    ops->relu_backward(h, g_wide, g_wide, mul(rows, F));
    linear_bwd(s, L.ffn1, x, g_wide, rows, g_x);
  }
  template <class Layer>
  void self_attention_bwd(ParamStore& s, Layer& L, const float* x, int64_t rows, const AttentionDims& a) {
    linear_bwd(s, L.out, saved(L.attn, L.attn16, w_attn, rows, d), g_sub, rows, g_x);
    const float* qkv = saved(L.qkv_act, L.qkv16, w_qkv, rows, 3 * d);
    ops->attention_backward(a, qkv, 3 * d, qkv + d, 3 * d, qkv + 2 * d, 3 * d, L.probs, g_x, d, g_wide, g_wide + d,
                            g_wide + 2 * d);
    linear_bwd(s, L.qkv, x, g_wide, rows, g_sub);
  }

  // Encoder over [B, S]; returns the final output [B*S, d].
  const float* encoder_fwd(const ParamStore& s, int B, int S, const int32_t* src, const int32_t* src_len) {
    const int64_t rows = int64_t(B) * S;
    embed(s, src, B, S, 0, x0_mask, x0);
    const float* x = x0;
    for (EncoderLayer& L : enc) {
      self_attention_fwd(s, L, x, rows, dims(B, S, S, false), src_len);
      residual_norm_fwd(s, L.ln1, x, scratch, rows, L.mask1, L.r1, L.x1, L.m1, L.i1);
      feed_forward_fwd(s, L, L.x1, rows);
      residual_norm_fwd(s, L.ln2, L.x1, scratch, rows, L.mask2, L.r2, L.x2, L.m2, L.i2);
      x = L.x2;
    }
    return x;
  }

  // Decoder over [B, T] (teacher forcing) against the encoder output [B*S, d].
  const float* decoder_fwd(const ParamStore& s, int B, int T, int S, const float* enc_out) {
    const int64_t rows = int64_t(B) * T, src_rows = int64_t(B) * S;
    embed(s, d_tgt_in, B, T, 0, y0_mask, y0);
    const float* y = y0;
    for (DecoderLayer& L : dec) {
      self_attention_fwd(s, L, y, rows, dims(B, T, T, true), d_tgt_len);
      residual_norm_fwd(s, L.ln1, y, scratch, rows, L.mask1, L.r1, L.y1, L.m1, L.i1);
      // The cross-attention's output reuses the self-attention's shared buffer: that one is kept.
      float *q = target(L.q_act, w_q), *kv = target(L.kv_act, w_kv), *cross = target(L.cross_attn, w_attn);
      linear_fwd(s, L.q, L.y1, rows, q);
      linear_fwd(s, L.kv, enc_out, src_rows, kv);
      ops->attention_forward(dims(B, T, S, false), q, d, kv, 2 * d, kv + d, 2 * d, d_src_len, L.cross_probs, cross, d);
      keep(q, rows, d, L.q16);
      keep(kv, src_rows, 2 * d, L.kv16);
      keep(cross, rows, d, L.cross_attn16);
      linear_fwd(s, L.cross_out, cross, rows, scratch);
      residual_norm_fwd(s, L.ln2, L.y1, scratch, rows, L.mask2, L.r2, L.y2, L.m2, L.i2);
      feed_forward_fwd(s, L, L.y2, rows);
      residual_norm_fwd(s, L.ln3, L.y2, scratch, rows, L.mask3, L.r3, L.y3, L.m3, L.i3);
      y = L.y3;
    }
    return y;
  }

  void ready_views(size_t first, size_t end, const std::function<void(size_t)>& ready) const {
    if (!ready) return;
    for (size_t v = end; v > first; --v) ready(v - 1);
  }

  void train_batch(ParamStore& s, const TranslationBatch& b, float grad_scale, uint64_t dropout_seed,
                   double* loss_sum, const std::function<void(size_t)>& ready) override {
    const int B = b.batch, S = b.src_len, T = b.tgt_len;
    MLPD_CHECK(B >= 1 && B <= spec.limits.max_batch && S <= spec.limits.max_src_len && T <= spec.limits.max_tgt_len,
               "transformer batch larger than the model was built for");
    training = true;
    drop_seed = dropout_seed;
    drop_offset = 0;
    const Device dev = spec.device;
    copy_to_device(dev, d_src, b.src.data(), b.src.size() * sizeof(int32_t));
    copy_to_device(dev, d_src_len, b.src_lengths.data(), size_t(B) * sizeof(int32_t));
    copy_to_device(dev, d_tgt_in, b.tgt_in.data(), b.tgt_in.size() * sizeof(int32_t));
    copy_to_device(dev, d_tgt_len, b.tgt_lengths.data(), size_t(B) * sizeof(int32_t));
    vidx.clear();
    vlab.clear();
    for (int i = 0; i < B; ++i)
      for (int t = 0; t < b.tgt_lengths[size_t(i)]; ++t) {
        vidx.push_back(i * T + t);
        vlab.push_back(b.tgt_out[size_t(i) * size_t(T) + size_t(t)]);
      }
    const int N = static_cast<int>(vidx.size());
    copy_to_device(dev, d_vidx, vidx.data(), size_t(N) * sizeof(int32_t));
    copy_to_device(dev, d_vlab, vlab.data(), size_t(N) * sizeof(int32_t));

    const int64_t src_rows = int64_t(B) * S, rows = int64_t(B) * T;
    const float* enc_out = encoder_fwd(s, B, S, d_src, d_src_len);
    const float* y = decoder_fwd(s, B, T, S, enc_out);
    // Output projection over the target tokens only (no padding rows): logits = yv E^T.
    const float* E = param_ptr(s, embedding);
    ops->embedding_gather(y, d, d_vidx, N, yv, d);
    ops->gemm(false, true, N, V, d, 1.0f, yv, d, E, d, 0.0f, logits, V);
    ops->softmax_xent(logits, d_vlab, N, V, spec.label_smoothing, grad_scale, dlogits, loss_sum, nullptr);
    // dyv = dlogits E; dE += dlogits^T yv; then back to the padded rows.
    ops->gemm(false, false, N, d, V, 1.0f, dlogits, V, E, d, 0.0f, dyv, d);
    ops->gemm(true, false, V, d, N, 1.0f, dlogits, V, yv, d, 1.0f, grad_ptr(s, embedding), d);
    zero_on(dev, g_y, mul(rows, d) * sizeof(float));
    ops->embedding_scatter_add(g_y, d, d_vidx, N, dyv, d);

    zero_on(dev, g_enc, mul(src_rows, d) * sizeof(float));
    for (size_t li = dec.size(); li-- > 0;) {
      DecoderLayer& L = dec[li];
      const float* y_in = li == 0 ? y0 : dec[li - 1].y3;
      // Feed-forward block.
      residual_norm_bwd(s, L.ln3, L.r3, g_y, rows, L.mask3, L.m3, L.i3, g_r, g_sub);
      feed_forward_bwd(s, L, L.y2, rows);
      ops->add_forward(g_r, g_x, g_y, mul(rows, d));
      // Cross-attention block.
      residual_norm_bwd(s, L.ln2, L.r2, g_y, rows, L.mask2, L.m2, L.i2, g_r, g_sub);
      linear_bwd(s, L.cross_out, saved(L.cross_attn, L.cross_attn16, w_attn, rows, d), g_sub, rows, g_x);
      const float* q = saved(L.q_act, L.q16, w_q, rows, d);
      const float* kv = saved(L.kv_act, L.kv16, w_kv, src_rows, 2 * d);
      ops->attention_backward(dims(B, T, S, false), q, d, kv, 2 * d, kv + d, 2 * d, L.cross_probs, g_x, d, g_wide, g_kv,
                              g_kv + d);
      linear_bwd(s, L.kv, enc_out, g_kv, src_rows, g_enc_tmp);
      ops->add_forward(g_enc, g_enc_tmp, g_enc, mul(src_rows, d));
      linear_bwd(s, L.q, L.y1, g_wide, rows, g_sub);
      ops->add_forward(g_r, g_sub, g_y, mul(rows, d));
      // Self-attention block.
      residual_norm_bwd(s, L.ln1, L.r1, g_y, rows, L.mask1, L.m1, L.i1, g_r, g_sub);
      self_attention_bwd(s, L, y_in, rows, dims(B, T, T, true));
      ops->add_forward(g_r, g_sub, g_y, mul(rows, d));
      ready_views(L.first_view, L.end_view, ready);
    }
    embed_bwd(s, d_tgt_in, rows, y0_mask, g_y);

    copy_within(dev, g_y, g_enc, mul(src_rows, d) * sizeof(float));
    for (size_t li = enc.size(); li-- > 0;) {
      EncoderLayer& L = enc[li];
      const float* x_in = li == 0 ? x0 : enc[li - 1].x2;
      residual_norm_bwd(s, L.ln2, L.r2, g_y, src_rows, L.mask2, L.m2, L.i2, g_r, g_sub);
      feed_forward_bwd(s, L, L.x1, src_rows);
      ops->add_forward(g_r, g_x, g_y, mul(src_rows, d));
      residual_norm_bwd(s, L.ln1, L.r1, g_y, src_rows, L.mask1, L.m1, L.i1, g_r, g_sub);
      self_attention_bwd(s, L, x_in, src_rows, dims(B, S, S, false));
      ops->add_forward(g_r, g_sub, g_y, mul(src_rows, d));
      ready_views(L.first_view, L.end_view, ready);
    }
    embed_bwd(s, d_src, src_rows, x0_mask, g_y);
    if (ready) ready(embedding);
    training = false;
  }

  // Gradient of the (dropped-out) embedding output into the shared table.
  void embed_bwd(ParamStore& s, const int32_t* tokens, int64_t rows, const uint8_t* mask, float* dout) {
    const size_t count = mul(rows, d);
    if (spec.dropout > 0.0f) ops->dropout_backward(dout, mask, count, spec.dropout, dout);
    ops->token_embedding_backward(grad_ptr(s, embedding), d, tokens, static_cast<int>(rows),
                                  std::sqrt(static_cast<float>(d)), dout);
  }

  // ---- decoding ----
  void begin_decode(const ParamStore& s, const TranslationBatch& b, int beam) override {
    const int B = b.batch, S = b.src_len;
    MLPD_CHECK(B >= 1 && B <= spec.limits.max_eval_batch && S <= spec.limits.max_src_len &&
                   beam >= 1 && beam <= spec.limits.max_beam,
               "transformer decode batch larger than the model was built for");
    training = false;
    const Device dev = spec.device;
    copy_to_device(dev, d_src, b.src.data(), b.src.size() * sizeof(int32_t));
    copy_to_device(dev, d_src_len, b.src_lengths.data(), size_t(B) * sizeof(int32_t));
    const float* enc_out = encoder_fwd(s, B, S, d_src, d_src_len);
    dec_batch = B;
    dec_beam = beam;
    dec_rows = B * beam;
    dec_src_len = S;
    dec_cache_len = spec.limits.max_decode_len;
    // Each layer's cross keys and values, once per sentence.
    copy_to_device(dev, d_dec_src_len, b.src_lengths.data(), size_t(B) * sizeof(int32_t));
    for (DecoderLayer& L : dec) {
      linear_fwd(s, L.kv, enc_out, int64_t(B) * S, target(L.cross_kv, w_kv));
      keep(w_kv, int64_t(B) * S, 2 * d, L.cross_kv16);
    }
  }

  // Hypothesis r's cache rows [0, step) become those of its parent: gathered into the spare, which
  // then trades places with the layer's cache.
  template <class T>
  void reorder_cache(T*& cache, T*& spare, const int32_t* parents, int rows, int step) const {
    const size_t block = mul(dec_cache_len, 2 * d);
    for (int r = 0; r < rows; ++r)
      copy_within(spec.device, spare + size_t(r) * block, cache + size_t(parents[r]) * block,
                  mul(step, 2 * d) * sizeof(T));
    std::swap(cache, spare);
  }

  // Attention over keys and values kept at k and k + d with row stride 2d: fp32, or bf16 bits.
  void attention_over(const AttentionDims& a, const float* q, int ldq, const float* kv, const uint16_t* kv16,
                      const int32_t* lengths, float* probs, float* out, int ldo) const {
    if (kv16)
      ops->attention_forward_bf16_kv(a, q, ldq, kv16, 2 * d, kv16 + d, 2 * d, lengths, probs, out, ldo);
    else
      ops->attention_forward(a, q, ldq, kv, 2 * d, kv + d, 2 * d, lengths, probs, out, ldo);
  }

  void decode_step(const ParamStore& s, int step, const int32_t* last_tokens, const int32_t* parents, int rows,
                   float* log_probs) override {
    MLPD_CHECK(rows == dec_rows && step < dec_cache_len, "transformer decode step out of range");
    const Device dev = spec.device;
    const size_t block = mul(dec_cache_len, 2 * d);
    if (step > 0) {
      bool identity = true;
      for (int r = 0; r < rows; ++r) identity = identity && parents[r] == r;
      if (!identity)
        for (DecoderLayer& L : dec) {
          if (bf16_storage)
            reorder_cache(L.cache16, spare_cache16, parents, rows, step);
          else
            reorder_cache(L.cache, spare_cache, parents, rows, step);
        }
    }
    copy_to_device(dev, d_tokens, last_tokens, size_t(rows) * sizeof(int32_t));
    host_lens.assign(size_t(rows), step + 1);  // every row sees positions 0..step
    copy_to_device(dev, d_self_len, host_lens.data(), size_t(rows) * sizeof(int32_t));
    embed(s, d_tokens, rows, 1, step, nullptr, dec_y);
    float* y = dec_y;
    for (DecoderLayer& L : dec) {
      linear_fwd(s, L.qkv, y, rows, dec_qkv);
      if (bf16_storage)
        ops->bf16_pack_rows(dec_qkv + d, rows, 2 * d, 3 * d, L.cache16 + size_t(step) * 2 * d, static_cast<int>(block));
      else
        ops->copy_rows(dec_qkv + d, 3 * d, rows, 2 * d, L.cache + size_t(step) * 2 * d, static_cast<int>(block));
      attention_over(dims(rows, 1, dec_cache_len, false), dec_qkv, 3 * d, L.cache, L.cache16, d_self_len, dec_probs,
                     dec_attn, d);
      linear_fwd(s, L.out, dec_attn, rows, dec_sub);
      residual_norm_fwd(s, L.ln1, y, dec_sub, rows, nullptr, dec_r, dec_y1, dec_mean, dec_inv);
      linear_fwd(s, L.q, dec_y1, rows, dec_qkv);
      // Rows b * beam + j, for each place j in the beam: one query per sentence over its keys, each
      // summed as a batch row of its own (tests/kernels: Attention.BeamRowsOverSharedKeys...).
      for (int j = 0; j < dec_beam; ++j)
        attention_over(dims(dec_batch, 1, dec_src_len, false), dec_qkv + size_t(j) * d, dec_beam * d, L.cross_kv,
                       L.cross_kv16, d_dec_src_len, dec_probs + size_t(j) * dec_batch * H * dec_src_len,
                       dec_attn + size_t(j) * d, dec_beam * d);
      linear_fwd(s, L.cross_out, dec_attn, rows, dec_sub);
      residual_norm_fwd(s, L.ln2, dec_y1, dec_sub, rows, nullptr, dec_r, y, dec_mean, dec_inv);
      linear_fwd(s, L.ffn1, y, rows, dec_h);
      ops->relu_forward(dec_h, dec_h, mul(rows, F));
      linear_fwd(s, L.ffn2, dec_h, rows, dec_sub);
      residual_norm_fwd(s, L.ln3, y, dec_sub, rows, nullptr, dec_r, dec_y1, dec_mean, dec_inv);
      copy_within(dev, y, dec_y1, mul(rows, d) * sizeof(float));
    }
    ops->gemm(false, true, rows, V, d, 1.0f, y, d, param_ptr(s, embedding), d, 0.0f, logits, V);
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
    uint64_t stream = 1;
    auto fill_uniform = [&](size_t view, float bound) {
      Rng r{seed, stream++};
      float* p = s.params.data() + s.views[view].offset;
      for (size_t i = 0; i < s.views[view].count; ++i) p[i] = bound * (2.0f * r.uniform() - 1.0f);
    };
    auto fill = [&](size_t view, float value) {
      float* p = s.params.data() + s.views[view].offset;
      std::fill(p, p + s.views[view].count, value);
    };
    // Embedding N(0, d^-1/2) (fairseq), the padding row zero.
    {
      Rng r{seed, stream++};
      float* p = s.params.data() + s.views[embedding].offset;
      const float sd = 1.0f / std::sqrt(static_cast<float>(d));
      for (size_t i = 0; i < s.views[embedding].count; ++i) p[i] = sd * r.normal();
      std::fill(p, p + d, 0.0f);
    }
    // Linear weights Xavier uniform, biases zero; layer norms gamma 1, beta 0.
    auto init_linear = [&](const Linear& l) {
      fill_uniform(l.w, std::sqrt(6.0f / static_cast<float>(l.in + l.out)));
      fill(l.b, 0.0f);
    };
    auto init_norm = [&](const Norm& n) {
      fill(n.gamma, 1.0f);
      fill(n.beta, 0.0f);
    };
    for (const EncoderLayer& L : enc) {
      for (const Linear* l : {&L.qkv, &L.out, &L.ffn1, &L.ffn2}) init_linear(*l);
      for (const Norm* n : {&L.ln1, &L.ln2}) init_norm(*n);
    }
    for (const DecoderLayer& L : dec) {
      for (const Linear* l : {&L.qkv, &L.out, &L.q, &L.kv, &L.cross_out, &L.ffn1, &L.ffn2}) init_linear(*l);
      for (const Norm* n : {&L.ln1, &L.ln2, &L.ln3}) init_norm(*n);
    }
  }

  size_t activation_bytes() const override { return buffers.bytes; }
  std::string summary(const ParamStore& s) const override {
    return "Transformer d_model " + std::to_string(d) + ", " + std::to_string(H) + " heads, ffn " +
           std::to_string(F) + ", " + std::to_string(enc.size()) + "+" + std::to_string(dec.size()) +
           " layers (post-norm), shared " + std::to_string(V) + "-token embedding, dropout " +
           std::to_string(spec.dropout).substr(0, 4) + ", " + std::to_string(s.param_count) + " parameters";
  }

  double train_flops_per_token() const override {
    const double dd = d, ff = F, vv = V;
    const double enc_token = enc.size() * (2.0 * (4 * dd * dd + 2 * dd * ff));
    const double dec_token = dec.size() * (2.0 * (6 * dd * dd + 2 * dd * ff)) + 2.0 * dd * vv;
    const double cross_kv_per_src = dec.size() * 2.0 * 2 * dd * dd;
    return 3.0 * (enc_token + dec_token + cross_kv_per_src) / 2.0;  // source and target tokens about equal
  }
};

}  // namespace

std::unique_ptr<Seq2Seq> build_transformer(const TransformerSpec& spec, ParamStore& store) {
  check_seq2seq_spec("transformer", spec.vocab, spec.limits, spec.dropout);
  const Seq2SeqLimits& lim = spec.limits;
  if (spec.d_model < 2 || spec.d_model % 2 != 0) throw UserError("transformer: d_model must be even and >= 2", 2);
  if (spec.heads < 1 || spec.d_model % spec.heads != 0) throw UserError("transformer: heads must divide d_model", 2);
  if (spec.ffn_dim < 1 || spec.encoder_layers < 1 || spec.decoder_layers < 1)
    throw UserError("transformer: ffn_dim, encoder_layers and decoder_layers must be positive", 2);
  auto m = std::make_unique<Transformer>();
  Transformer& t = *m;
  t.spec = spec;
  t.ops = &ops_for(spec.device, spec.precision);
  t.bf16_storage = spec.precision == Precision::bf16 && spec.bf16_storage;
  t.buffers.device = spec.device;
  t.d = spec.d_model;
  t.H = spec.heads;
  t.F = spec.ffn_dim;
  t.V = spec.vocab;
  const int d = t.d;
  t.embedding = add_param(store, "shared_embedding", mul(t.V, d), ParamKind::weight);
  for (int l = 0; l < spec.encoder_layers; ++l) {
    const std::string n = "encoder" + std::to_string(l);
    EncoderLayer L;
    L.first_view = store.views.size();
    L.qkv = t.linear(store, n + ".self_attn.qkv", d, 3 * d);
    L.out = t.linear(store, n + ".self_attn.out", d, d);
    L.ln1 = t.norm(store, n + ".self_attn_norm");
    L.ffn1 = t.linear(store, n + ".ffn1", d, t.F);
    L.ffn2 = t.linear(store, n + ".ffn2", t.F, d);
    L.ln2 = t.norm(store, n + ".ffn_norm");
    L.end_view = store.views.size();
    t.enc.push_back(L);
  }
  for (int l = 0; l < spec.decoder_layers; ++l) {
    const std::string n = "decoder" + std::to_string(l);
    DecoderLayer L;
    L.first_view = store.views.size();
    L.qkv = t.linear(store, n + ".self_attn.qkv", d, 3 * d);
    L.out = t.linear(store, n + ".self_attn.out", d, d);
    L.ln1 = t.norm(store, n + ".self_attn_norm");
    L.q = t.linear(store, n + ".cross_attn.q", d, d);
    L.kv = t.linear(store, n + ".cross_attn.kv", d, 2 * d);
    L.cross_out = t.linear(store, n + ".cross_attn.out", d, d);
    L.ln2 = t.norm(store, n + ".cross_attn_norm");
    L.ffn1 = t.linear(store, n + ".ffn1", d, t.F);
    L.ffn2 = t.linear(store, n + ".ffn2", t.F, d);
    L.ln3 = t.norm(store, n + ".ffn_norm");
    L.end_view = store.views.size();
    t.dec.push_back(L);
  }

  // Buffers, sized for the largest training batch and the largest decode batch.
  const int B = lim.max_batch, S = lim.max_src_len, T = lim.max_tgt_len, H = t.H;
  const int EB = std::max(B, lim.max_eval_batch);
  const int64_t rs = int64_t(EB) * S, rt = int64_t(B) * T;
  const int rows_dec = lim.max_eval_batch * lim.max_beam, TC = lim.max_decode_len;
  const int64_t rmax = std::max({rs, rt, int64_t(rows_dec)});
  const int wide = std::max(3 * d, t.F);
  t.rows_src = rs;
  t.rows_tgt = rt;
  t.x0 = t.floats(mul(rs, d));
  t.x0_mask = t.bytes(mul(rs, d));
  t.y0 = t.floats(mul(rt, d));
  t.y0_mask = t.bytes(mul(rt, d));
  t.scratch = t.floats(mul(rmax, std::max(d, t.F)));
  const bool b16 = t.bf16_storage;
  if (b16) {  // the shared buffers of bf16 storage; the beam search's are the same ones
    t.w_qkv = t.floats(mul(rmax, 3 * d));
    t.w_attn = t.floats(mul(rmax, d));
    t.w_h = t.floats(mul(rmax, t.F));
    t.w_q = t.floats(mul(rt, d));
    t.w_kv = t.floats(mul(rs, 2 * d));
  }
  for (EncoderLayer& L : t.enc) {
    t.saved_buffer(mul(rs, 3 * d), L.qkv_act, L.qkv16);
    t.saved_buffer(mul(rs, d), L.attn, L.attn16);
    t.saved_buffer(mul(rs, t.F), L.h, L.h16);
    L.probs = t.floats(mul(int64_t(EB) * H * S, S));
    L.r1 = t.floats(mul(rs, d));
    L.x1 = t.floats(mul(rs, d));
    L.m1 = t.floats(size_t(rs));
    L.i1 = t.floats(size_t(rs));
    L.r2 = t.floats(mul(rs, d));
    L.x2 = t.floats(mul(rs, d));
    L.m2 = t.floats(size_t(rs));
    L.i2 = t.floats(size_t(rs));
    L.mask1 = t.bytes(mul(rs, d));
    L.mask2 = t.bytes(mul(rs, d));
  }
  for (DecoderLayer& L : t.dec) {
    t.saved_buffer(mul(rt, 3 * d), L.qkv_act, L.qkv16);
    t.saved_buffer(mul(rt, d), L.attn, L.attn16);
    t.saved_buffer(mul(rt, d), L.q_act, L.q16);
    t.saved_buffer(mul(rs, 2 * d), L.kv_act, L.kv16);
    t.saved_buffer(mul(rt, d), L.cross_attn, L.cross_attn16);
    t.saved_buffer(mul(rt, t.F), L.h, L.h16);
    L.probs = t.floats(mul(int64_t(B) * H * T, T));
    L.r1 = t.floats(mul(rt, d));
    L.y1 = t.floats(mul(rt, d));
    L.m1 = t.floats(size_t(rt));
    L.i1 = t.floats(size_t(rt));
    L.cross_probs = t.floats(mul(int64_t(B) * H * T, S));
    L.r2 = t.floats(mul(rt, d));
    L.y2 = t.floats(mul(rt, d));
    L.m2 = t.floats(size_t(rt));
    L.i2 = t.floats(size_t(rt));
    L.r3 = t.floats(mul(rt, d));
    L.y3 = t.floats(mul(rt, d));
    L.m3 = t.floats(size_t(rt));
    L.i3 = t.floats(size_t(rt));
    L.mask1 = t.bytes(mul(rt, d));
    L.mask2 = t.bytes(mul(rt, d));
    L.mask3 = t.bytes(mul(rt, d));
    t.saved_buffer(mul(int64_t(lim.max_eval_batch) * S, 2 * d), L.cross_kv, L.cross_kv16);
    t.saved_buffer(mul(int64_t(rows_dec) * TC, 2 * d), L.cache, L.cache16);
  }
  t.saved_buffer(mul(int64_t(rows_dec) * TC, 2 * d), t.spare_cache, t.spare_cache16);
  t.logits = t.floats(mul(std::max<int64_t>(rt, rows_dec), t.V));
  t.dlogits = t.logits;  // softmax_xent writes the gradient over the logits, which nothing reads after
  t.yv = t.floats(mul(rt, d));
  t.dyv = t.floats(mul(rt, d));
  t.g_y = t.floats(mul(rmax, d));
  t.g_r = t.floats(mul(rmax, d));
  t.g_sub = t.floats(mul(rmax, d));
  t.g_x = t.floats(mul(rmax, d));
  t.g_wide = t.floats(mul(rmax, wide));
  t.g_kv = t.floats(mul(rs, 2 * d));
  t.g_enc = t.floats(mul(rs, d));
  t.g_enc_tmp = t.floats(mul(rs, d));
  t.d_src = t.ints(size_t(rs));
  t.d_src_len = t.ints(size_t(EB));
  t.d_dec_src_len = t.ints(size_t(lim.max_eval_batch));
  t.d_tgt_in = t.ints(size_t(rt));
  t.d_tgt_len = t.ints(size_t(B));
  t.d_vidx = t.ints(size_t(rt));
  t.d_vlab = t.ints(size_t(rt));
  t.d_tokens = t.ints(size_t(rows_dec));
  t.d_self_len = t.ints(size_t(rows_dec));
  t.dec_y = t.floats(mul(rows_dec, d));
  t.dec_qkv = b16 ? t.w_qkv : t.floats(mul(rows_dec, 3 * d));
  t.dec_probs = t.floats(mul(int64_t(rows_dec) * H, std::max(TC, S)));
  t.dec_attn = b16 ? t.w_attn : t.floats(mul(rows_dec, d));
  t.dec_sub = t.floats(mul(rows_dec, d));
  t.dec_r = t.floats(mul(rows_dec, d));
  t.dec_y1 = t.floats(mul(rows_dec, d));
  t.dec_mean = t.floats(size_t(rows_dec));
  t.dec_inv = t.floats(size_t(rows_dec));
  t.dec_h = b16 ? t.w_h : t.floats(mul(rows_dec, t.F));
  t.vidx.reserve(size_t(rt));
  t.vlab.reserve(size_t(rt));
  return m;
}

}  // namespace mlpd
