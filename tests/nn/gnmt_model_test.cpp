// The GNMT model: whole-model finite differences (label-smoothed loss over a padded batch, w.r.t.
// every parameter view; 2+2 and 3+3 layers so the residual paths are covered, and with dropout at
// a fixed seed), padding that cannot change the loss, dropout reproducible from its seed, ready()
// once per view in non-increasing order, and decoding that agrees with teacher forcing (including
// a beam reorder of the LSTM states).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../kernels/grad_check.h"
#include "tiny_translation_batch.h"
#include "workloads/gnmt/gnmt_model.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

constexpr int kVocab = 11;

TranslationBatch tiny_batch() { return tiny_translation_batch(); }

struct TinyModel {
  ParamStore store;
  std::unique_ptr<Seq2Seq> model;
  explicit TinyModel(float dropout, int layers = 2, float label_smoothing = 0.1f, float scale = 1.0f,
                     int max_batch = 3) {
    GnmtSpec spec;
    spec.vocab = kVocab;
    spec.hidden = 8;
    spec.encoder_layers = layers;
    spec.decoder_layers = layers;
    spec.dropout = dropout;
    spec.label_smoothing = label_smoothing;
    spec.limits.max_batch = max_batch;
    spec.limits.max_src_len = 4;
    spec.limits.max_tgt_len = 6;
    spec.limits.max_eval_batch = 3;
    spec.limits.max_beam = 2;
    spec.limits.max_decode_len = 6;
    model = build_gnmt(spec, store);
    finalize_params(store);
    model->init_parameters(store, 11);
    // Larger than the +-0.1 init, so that every path carries a visible gradient; with scale > 1
    // also a sharper attention (g sets the scores' range), so that its queries matter.
    for (float& p : store.params) p *= scale;
    if (scale > 1.0f)
      for (size_t v = 0; v < store.views.size(); ++v)
        if (store.views[v].name == "attention.g") param_ptr(store, v)[0] = 6.0f;
  }
  double loss(const TranslationBatch& b, uint64_t seed = 3) {
    return test::added_loss([&](double* l) { model->train_batch(store, b, 1.0f, seed, l, nullptr); });
  }
};

void check_gradients(TinyModel& m) {
  const TranslationBatch b = tiny_batch();
  std::fill(m.store.grads.begin(), m.store.grads.end(), 0.0f);
  m.loss(b);
  const std::vector<float> analytic = m.store.grads;
  int nonzero = 0;
  for (float g : analytic) nonzero += g != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(m.store.param_count) * 3 / 4);
  auto loss = [&] { return m.loss(b); };
  for (size_t v = 0; v < m.store.views.size(); ++v) {
    const ParamView& view = m.store.views[v];
    SCOPED_TRACE(view.name);
    expect_grad_close(view.name.c_str(), loss, param_ptr(m.store, v), view.count, analytic.data() + view.offset,
                      1e-2, 2e-2, 5e-4, 24);
  }
  // The padding row's embedding gets no gradient: padded positions cannot reach the loss.
  for (int j = 0; j < 8; ++j) EXPECT_EQ(analytic[m.store.views[0].offset + size_t(j)], 0.0f);
}

TEST(GnmtModel, WholeModelGradientMatchesFiniteDifferences) {
  TinyModel m(0.0f, 2, 0.1f, 4.0f);
  check_gradients(m);
}

TEST(GnmtModel, GradientWithResidualLayersMatchesFiniteDifferences) {
  TinyModel m(0.0f, 3, 0.1f, 4.0f);
  check_gradients(m);
}

TEST(GnmtModel, GradientWithDropoutAtAFixedSeedMatchesFiniteDifferences) {
  TinyModel m(0.2f, 3, 0.1f, 4.0f);
  check_gradients(m);
}

// The attention's scores are a weak path: decoder layer 0 reaches the loss as layer 1's input
// (strong) and as the query (< 2% of its gradient in the tests above); the encoder as the values
// (strong) and as the keys. Here layer 1 ignores its first input half, so layer 0's gradient is the
// query path alone, and a sharper attention (larger W_q, W_k, g; more varied encoder outputs) with
// an absolute tolerance just above the differences' rounding noise (~5e-6) makes the key path
// visible in the encoder's gradient.
TEST(GnmtModel, GradientThroughTheAttentionScoresMatchesFiniteDifferences) {
  TinyModel m(0.0f, 2, 0.1f, 4.0f);
  const TranslationBatch b = tiny_batch();
  const int H = 8;
  auto view = [&](const std::string& name) {
    for (size_t v = 0; v < m.store.views.size(); ++v)
      if (m.store.views[v].name == name) return v;
    ADD_FAILURE() << "no view " << name;
    return size_t(0);
  };
  // Varied encoder outputs (the values), a context that matters to layer 1, sharp scores.
  for (const char* name : {"encoder0.forward.w_x", "encoder0.backward.w_x", "encoder1.w_x", "decoder1.w_x",
                           "attention.w_q", "attention.w_k"}) {
    const size_t v = view(name);
    for (size_t i = 0; i < m.store.views[v].count; ++i) param_ptr(m.store, v)[i] *= 3.0f;
  }
  std::fill_n(param_ptr(m.store, view("decoder1.w_x")), H * 4 * H, 0.0f);  // rows 0..H-1: layer 0's output
  std::fill(m.store.grads.begin(), m.store.grads.end(), 0.0f);
  m.loss(b);
  const std::vector<float> analytic = m.store.grads;
  auto loss = [&] { return m.loss(b); };
  for (const char* name : {"decoder0.w_x", "decoder0.w_h", "decoder0.bias", "attention.w_q", "attention.w_k",
                           "encoder0.forward.w_x", "encoder0.backward.w_x", "encoder1.w_x", "encoder1.w_h",
                           "encoder1.bias", "shared_embedding"}) {
    const size_t v = view(name);
    const float* a = analytic.data() + m.store.views[v].offset;
    float largest = 0.0f;
    for (size_t i = 0; i < m.store.views[v].count; ++i) largest = std::max(largest, std::fabs(a[i]));
    EXPECT_GT(largest, 5e-5f) << name;  // the path is not negligible
    SCOPED_TRACE(name);
    expect_grad_close(name, loss, param_ptr(m.store, v), m.store.views[v].count, a, 1e-2, 2e-2, 1.5e-5, 48);
  }
}

TEST(GnmtModel, ViewsCoverTheArchitecture) {
  TinyModel m(0.0f, 3);
  const int H = 8, G = 4 * H;
  std::vector<std::pair<std::string, size_t>> expected{
      {"shared_embedding", size_t(kVocab * H)},
      {"encoder0.forward.w_x", size_t(H * G)},   {"encoder0.forward.w_h", size_t(H * G)},
      {"encoder0.forward.bias", size_t(G)},      {"encoder0.backward.w_x", size_t(H * G)},
      {"encoder0.backward.w_h", size_t(H * G)},  {"encoder0.backward.bias", size_t(G)},
      {"encoder1.w_x", size_t(2 * H * G)},       {"encoder1.w_h", size_t(H * G)},
      {"encoder1.bias", size_t(G)},              {"encoder2.w_x", size_t(H * G)},
      {"encoder2.w_h", size_t(H * G)},           {"encoder2.bias", size_t(G)},
      {"decoder0.w_x", size_t(H * G)},           {"decoder0.w_h", size_t(H * G)},
      {"decoder0.bias", size_t(G)},              {"attention.w_q", size_t(H * H)},
      {"attention.w_k", size_t(H * H)},          {"attention.bias", size_t(H)},
      {"attention.v", size_t(H)},                {"attention.g", 1},
      {"decoder1.w_x", size_t(2 * H * G)},       {"decoder1.w_h", size_t(H * G)},
      {"decoder1.bias", size_t(G)},              {"decoder2.w_x", size_t(2 * H * G)},
      {"decoder2.w_h", size_t(H * G)},           {"decoder2.bias", size_t(G)},
      {"classifier.weight", size_t(H * kVocab)}, {"classifier.bias", size_t(kVocab)}};
  ASSERT_EQ(m.store.views.size(), expected.size());
  for (size_t v = 0; v < expected.size(); ++v) {
    EXPECT_EQ(m.store.views[v].name, expected[v].first);
    EXPECT_EQ(m.store.views[v].count, expected[v].second) << expected[v].first;
  }
  // Init: uniform(-0.1, 0.1), padding row 0, attention bias 0, g = 1/sqrt(hidden).
  for (size_t v = 0; v < m.store.views.size(); ++v) {
    if (v == 20) continue;  // g
    const float* p = param_ptr(m.store, v);
    for (size_t i = 0; i < m.store.views[v].count; ++i) EXPECT_LE(std::fabs(p[i]), 0.1f + 1e-6f);
  }
  for (int j = 0; j < H; ++j) EXPECT_EQ(param_ptr(m.store, 0)[j], 0.0f);
  for (int j = 0; j < H; ++j) EXPECT_EQ(param_ptr(m.store, 18)[j], 0.0f);
  EXPECT_FLOAT_EQ(param_ptr(m.store, 20)[0], 1.0f / std::sqrt(8.0f));
  EXPECT_NE(m.model->summary(m.store).find(std::to_string(m.store.param_count)), std::string::npos);
  EXPECT_GT(m.model->train_flops_per_token(), 0.0);
}

TEST(GnmtModel, PaddingDoesNotChangeTheLoss) {
  for (int layers : {2, 3}) {
    TinyModel m(0.0f, layers, 0.1f, 4.0f);
    TranslationBatch b = tiny_batch();
    const double before = m.loss(b);
    // Other tokens in every padded position of sources and targets.
    for (size_t i : {6u, 7u, 11u}) b.src[i] = 3;
    for (size_t i : {3u, 10u, 11u}) {
      b.tgt_in[i] = 4;
      b.tgt_out[i] = 5;
    }
    EXPECT_DOUBLE_EQ(m.loss(b), before) << layers << " layers";
  }
}

TEST(GnmtModel, LossIsTheSumOverValidTokens) {
  // The batch's loss equals the sum of each sentence's loss on its own (unpadded).
  TinyModel m(0.0f, 3, 0.1f, 4.0f);
  const TranslationBatch b = tiny_batch();
  const double whole = m.loss(b);
  double parts = 0.0;
  for (int i = 0; i < b.batch; ++i) {
    TranslationBatch one;
    one.batch = 1;
    one.src_len = b.src_lengths[size_t(i)];
    one.tgt_len = b.tgt_lengths[size_t(i)];
    for (int t = 0; t < one.src_len; ++t) one.src.push_back(b.src[size_t(i * b.src_len + t)]);
    for (int t = 0; t < one.tgt_len; ++t) {
      one.tgt_in.push_back(b.tgt_in[size_t(i * b.tgt_len + t)]);
      one.tgt_out.push_back(b.tgt_out[size_t(i * b.tgt_len + t)]);
    }
    one.src_lengths = {one.src_len};
    one.tgt_lengths = {one.tgt_len};
    parts += m.loss(one);
  }
  EXPECT_NEAR(whole, parts, 1e-5 * std::fabs(whole));
}

TEST(GnmtModel, DropoutIsAFunctionOfItsSeed) {
  TinyModel m(0.3f, 3, 0.1f, 4.0f);
  const TranslationBatch b = tiny_batch();
  const double a = m.loss(b, 5);
  EXPECT_DOUBLE_EQ(m.loss(b, 5), a);
  EXPECT_NE(m.loss(b, 6), a);
  TinyModel plain(0.0f, 3, 0.1f, 4.0f);
  EXPECT_NE(plain.loss(b, 5), a);
}

TEST(GnmtModel, ReadyOncePerViewInNonIncreasingOrder) {
  for (int layers : {2, 3}) {
    TinyModel m(0.1f, layers);
    std::vector<size_t> seen;
    m.model->train_batch(m.store, tiny_batch(), 1.0f, 1, nullptr, [&seen](size_t v) { seen.push_back(v); });
    ASSERT_EQ(seen.size(), m.store.views.size());
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen.size() - 1 - i);
  }
}

// A one-sentence batch: source `src`, target input bos + prefix, target output `out` (same length).
TranslationBatch forced(const std::vector<int32_t>& src, const std::vector<int32_t>& in,
                        const std::vector<int32_t>& out) {
  TranslationBatch b;
  b.batch = 1;
  b.src_len = static_cast<int>(src.size());
  b.src = src;
  b.src_lengths = {b.src_len};
  b.tgt_len = static_cast<int>(in.size());
  b.tgt_in = in;
  b.tgt_out = out;
  b.tgt_lengths = {b.tgt_len};
  return b;
}

// Without label smoothing the loss of a one-token target is -log p(label | bos), and of a
// two-token target -log p(a | bos) - log p(label | bos a): every decoder log-probability can be
// read off training losses.
TEST(GnmtModel, DecodingAgreesWithTeacherForcingAtSteps0And1) {
  for (int layers : {2, 3}) {
    TinyModel m(0.0f, layers, 0.0f, 4.0f);
    const TranslationBatch src = tiny_batch();
    const int rows = 3, V = kVocab;
    const int32_t tok = 6;
    m.model->begin_decode(m.store, src, 1);
    std::vector<float> lp0(size_t(rows * V)), lp1(size_t(rows * V));
    std::vector<int32_t> last(rows, 1), parents{0, 1, 2};
    m.model->decode_step(m.store, 0, last.data(), parents.data(), rows, lp0.data());
    std::fill(last.begin(), last.end(), tok);
    m.model->decode_step(m.store, 1, last.data(), parents.data(), rows, lp1.data());
    for (int r = 0; r < rows; ++r) {
      const int len = src.src_lengths[size_t(r)];
      const std::vector<int32_t> s(src.src.begin() + r * src.src_len, src.src.begin() + r * src.src_len + len);
      for (int32_t y = 0; y < V; ++y) {
        const double l0 = m.loss(forced(s, {1}, {y}));
        EXPECT_NEAR(-lp0[size_t(r * V + y)], l0, 1e-4 * (1.0 + l0)) << "row " << r << " token " << y;
        const double l01 = m.loss(forced(s, {1, tok}, {tok, y}));
        const double l_tok = -lp0[size_t(r * V + tok)];
        EXPECT_NEAR(-lp1[size_t(r * V + y)], l01 - l_tok, 1e-4 * (1.0 + l01)) << "row " << r << " token " << y;
      }
    }
  }
}

// Every step of every sentence: three sources of different lengths decoded together along their
// own 5-token targets (max_decode_len 6), each step's log-probabilities equal to the difference of
// the teacher-forced losses of the prefixes one token apart.
TEST(GnmtModel, DecodingAgreesWithTeacherForcingAtEveryStep) {
  TinyModel m(0.0f, 3, 0.0f, 4.0f);
  const TranslationBatch src = tiny_batch();
  const int rows = 3, V = kVocab, steps = 5;
  const std::vector<std::vector<int32_t>> targets{{7, 3, 9, 4, 6}, {5, 5, 8, 10, 3}, {6, 9, 4, 7, 8}};
  m.model->begin_decode(m.store, src, 1);
  std::vector<float> lp(size_t(rows * V));
  std::vector<int32_t> last(rows, kBosToken), parents{0, 1, 2};
  for (int t = 0; t < steps; ++t) {
    m.model->decode_step(m.store, t, last.data(), parents.data(), rows, lp.data());
    for (int r = 0; r < rows; ++r) {
      const int len = src.src_lengths[size_t(r)];
      const std::vector<int32_t> s(src.src.begin() + r * src.src_len, src.src.begin() + r * src.src_len + len);
      const std::vector<int32_t>& y = targets[size_t(r)];
      std::vector<int32_t> in{kBosToken};
      in.insert(in.end(), y.begin(), y.begin() + t);
      const std::vector<int32_t> prefix(y.begin(), y.begin() + t);
      const double before = t == 0 ? 0.0 : m.loss(forced(s, {in.begin(), in.end() - 1}, prefix));
      for (int32_t next : {y[size_t(t)], int32_t(2)}) {
        std::vector<int32_t> out = prefix;
        out.push_back(next);
        const double step_loss = m.loss(forced(s, in, out)) - before;
        EXPECT_NEAR(-lp[size_t(r * V + next)], step_loss, 1e-4 * (1.0 + std::fabs(step_loss)))
            << "row " << r << " step " << t << " token " << next;
      }
      last[size_t(r)] = y[size_t(t)];
    }
  }
}

// A decode batch larger than the training batch is encoded in chunks of max_batch sentences:
// the decode gives the bits of one encoder pass over the whole batch, and the encoder's buffers
// are sized for the training batch.
TEST(GnmtModel, EncodingADecodeBatchInChunksGivesTheBitsOfOnePass) {
  TinyModel whole(0.0f, 3, 0.0f, 4.0f, 3), chunks(0.0f, 3, 0.0f, 4.0f, 1);
  ASSERT_EQ(whole.store.params, chunks.store.params);
  EXPECT_LT(chunks.model->activation_bytes(), whole.model->activation_bytes());
  const TranslationBatch b = tiny_batch();
  ASSERT_EQ(b.batch, 3);
  const int rows = 6, V = kVocab;
  std::vector<float> lp_whole(size_t(rows) * V), lp_chunks(lp_whole.size());
  std::vector<int32_t> last{1, 1, 1, 1, 1, 1}, parents{0, 1, 2, 3, 4, 5};
  whole.model->begin_decode(whole.store, b, 2);
  chunks.model->begin_decode(chunks.store, b, 2);
  for (int step = 0; step < 3; ++step) {
    whole.model->decode_step(whole.store, step, last.data(), parents.data(), rows, lp_whole.data());
    chunks.model->decode_step(chunks.store, step, last.data(), parents.data(), rows, lp_chunks.data());
    ASSERT_EQ(lp_whole, lp_chunks) << "step " << step;
    for (int r = 0; r < rows; ++r) last[size_t(r)] = 3 + (r + step) % 7;
  }
}

// Beam 2 over one sentence: the rows diverge at step 1, then swap parents at step 2; each row's
// step-2 probabilities must be those of its own history under teacher forcing.
TEST(GnmtModel, DecodingReordersTheStatesByParents) {
  TinyModel m(0.0f, 3, 0.0f, 4.0f);
  TranslationBatch src = forced({9, 4, 7}, {1}, {2});
  const int rows = 2, V = kVocab;
  m.model->begin_decode(m.store, src, 2);
  std::vector<float> lp(size_t(rows * V));
  std::vector<int32_t> last{1, 1}, parents{0, 1};
  m.model->decode_step(m.store, 0, last.data(), parents.data(), rows, lp.data());
  last = {5, 8};  // row 0: bos 5, row 1: bos 8
  m.model->decode_step(m.store, 1, last.data(), parents.data(), rows, lp.data());
  last = {3, 6};  // row 0 continues row 1 (bos 8 3), row 1 continues row 0 (bos 5 6)
  parents = {1, 0};
  m.model->decode_step(m.store, 2, last.data(), parents.data(), rows, lp.data());
  const std::vector<int32_t> s{9, 4, 7};
  for (int32_t y : {2, 7}) {
    const double a = m.loss(forced(s, {1, 8, 3}, {8, 3, y})) - m.loss(forced(s, {1, 8}, {8, 3}));
    const double b = m.loss(forced(s, {1, 5, 6}, {5, 6, y})) - m.loss(forced(s, {1, 5}, {5, 6}));
    EXPECT_NEAR(-lp[size_t(0 * V + y)], a, 1e-4 * (1.0 + std::fabs(a)));
    EXPECT_NEAR(-lp[size_t(1 * V + y)], b, 1e-4 * (1.0 + std::fabs(b)));
  }
  for (int r = 0; r < rows; ++r) {
    double total = 0.0;
    for (int j = 0; j < V; ++j) total += std::exp(static_cast<double>(lp[size_t(r * V + j)]));
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

}  // namespace
