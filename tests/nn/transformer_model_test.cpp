// The Transformer model: whole-model finite differences (label-smoothed loss over a padded batch,
// w.r.t. every parameter view), padding that cannot change the loss, dropout reproducible from its
// seed, ready() once per view in reverse order, and decoding that agrees with teacher forcing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../kernels/grad_check.h"
#include "tiny_translation_batch.h"
#include "workloads/transformer/transformer_model.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

TranslationBatch tiny_batch() { return tiny_translation_batch(); }

struct TinyModel {
  ParamStore store;
  std::unique_ptr<Seq2Seq> model;
  explicit TinyModel(float dropout, int layers = 2, float label_smoothing = 0.1f,
                     Precision precision = Precision::fp32, bool bf16_storage = true) {
    TransformerSpec spec;
    spec.precision = precision;
    spec.bf16_storage = bf16_storage;
    spec.vocab = 13;
    spec.d_model = 8;
    spec.heads = 2;
    spec.ffn_dim = 12;
    spec.encoder_layers = layers;
    spec.decoder_layers = layers;
    spec.dropout = dropout;
    spec.label_smoothing = label_smoothing;
    spec.limits.max_batch = 3;
    spec.limits.max_src_len = 4;
    spec.limits.max_tgt_len = 4;
    spec.limits.max_eval_batch = 3;
    spec.limits.max_beam = 2;
    spec.limits.max_decode_len = 6;
    model = build_transformer(spec, store);
    finalize_params(store);
    model->init_parameters(store, 11);
  }
  double loss(const TranslationBatch& b, uint64_t seed = 3) {
    return test::added_loss([&](double* l) { model->train_batch(store, b, 1.0f, seed, l, nullptr); });
  }
};

TEST(TransformerModel, WholeModelGradientMatchesFiniteDifferences) {
  TinyModel m(0.0f);
  // Feed-forward biases well above 0 keep every ReLU on one side of its kink, where central
  // differences are exact; with them at 0 a perturbation of 2e-3 flips a few units (errors ~5%).
  for (size_t v = 0; v < m.store.views.size(); ++v)
    if (m.store.views[v].name.find("ffn1.bias") != std::string::npos)
      for (size_t i = 0; i < m.store.views[v].count; ++i) param_ptr(m.store, v)[i] = 3.0f;
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
                      2e-3, 3e-2, 3e-4, 24);
  }
}

TEST(TransformerModel, PaddingDoesNotChangeTheLoss) {
  TinyModel m(0.0f);
  TranslationBatch b = tiny_batch();
  const double before = m.loss(b);
  // Other tokens in every padded position of sources and targets.
  for (size_t i : {6u, 7u, 11u}) b.src[i] = 3;
  for (size_t i : {3u, 10u, 11u}) {
    b.tgt_in[i] = 4;
    b.tgt_out[i] = 5;
  }
  EXPECT_DOUBLE_EQ(m.loss(b), before);
}

TEST(TransformerModel, DropoutIsAFunctionOfItsSeed) {
  TinyModel m(0.3f);
  const TranslationBatch b = tiny_batch();
  const double a = m.loss(b, 5);
  EXPECT_DOUBLE_EQ(m.loss(b, 5), a);
  EXPECT_NE(m.loss(b, 6), a);
  TinyModel plain(0.0f);
  EXPECT_NE(plain.loss(b, 5), a);
}

TEST(TransformerModel, ReadyOncePerViewInReverseOrder) {
  TinyModel m(0.1f, 3);
  std::vector<size_t> seen;
  m.model->train_batch(m.store, tiny_batch(), 1.0f, 1, nullptr, [&seen](size_t v) { seen.push_back(v); });
  ASSERT_EQ(seen.size(), m.store.views.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen.size() - 1 - i);
}

// Decoding step by step must give the probabilities teacher forcing gives: for a target [a, b]
// without label smoothing, the training loss is -log p(a | bos) - log p(b | bos a) - log p(eos | bos a b).
TEST(TransformerModel, DecodingAgreesWithTeacherForcing) {
  TinyModel m(0.0f, 2, 0.0f);
  TranslationBatch src = tiny_batch();
  const int32_t a = 7, b2 = 9;
  // Teacher forcing, one pair at a time (sentence 1's source).
  TranslationBatch one;
  one.batch = 1;
  one.src_len = 2;
  one.src = {9, 4};
  one.src_lengths = {2};
  one.tgt_len = 3;
  one.tgt_in = {1, a, b2};
  one.tgt_out = {a, b2, 2};
  one.tgt_lengths = {3};
  const double forced = m.loss(one);
  // Decoding with beam 2 over the three sources; sentence 1's rows are 2 and 3.
  m.model->begin_decode(m.store, src, 2);
  const int rows = 6, V = 13;
  std::vector<float> lp(static_cast<size_t>(rows * V));
  std::vector<int32_t> last(rows, 1), parents{0, 1, 2, 3, 4, 5};
  double decoded = 0.0;
  m.model->decode_step(m.store, 0, last.data(), parents.data(), rows, lp.data());
  decoded -= lp[2 * V + a];
  // Row 3 continues row 2 and row 2 continues row 3 (a swap), to exercise the cache reorder.
  std::fill(last.begin(), last.end(), 4);
  last[3] = a;
  parents = {0, 1, 3, 2, 4, 5};
  m.model->decode_step(m.store, 1, last.data(), parents.data(), rows, lp.data());
  decoded -= lp[3 * V + b2];
  last[3] = 4;
  last[2] = b2;
  parents = {0, 1, 3, 2, 4, 5};
  m.model->decode_step(m.store, 2, last.data(), parents.data(), rows, lp.data());
  decoded -= lp[2 * V + 2];
  EXPECT_NEAR(decoded, forced, 1e-4 * std::fabs(forced) + 1e-5);
  for (int r = 0; r < rows; ++r) {
    double total = 0.0;
    for (int j = 0; j < V; ++j) total += std::exp(static_cast<double>(lp[static_cast<size_t>(r * V + j)]));
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

// --precision bf16 keeps q, k, v, the attention outputs and the feed-forward hidden layer as bf16,
// and in decoding the cross keys and values and the self-attention caches: the same bits as
// keeping them in fp32, in training (with dropout) and in decoding (with the beam's reorder).
TEST(TransformerModel, Bf16StorageGivesTheBitsOfFp32Storage) {
  TinyModel kept(0.2f, 2, 0.1f, Precision::bf16, true), plain(0.2f, 2, 0.1f, Precision::bf16, false);
  EXPECT_LT(kept.model->activation_bytes(), plain.model->activation_bytes());
  const TranslationBatch b = tiny_batch();
  for (uint64_t seed : {3, 4}) {  // the second batch adds to the first one's gradients
    EXPECT_EQ(kept.loss(b, seed), plain.loss(b, seed));
    ASSERT_EQ(kept.store.grads, plain.store.grads) << "seed " << seed;
  }
  double norm = 0.0;
  for (float g : kept.store.grads) norm += double(g) * g;
  EXPECT_GT(norm, 0.0);
  const int rows = 6, V = 13;
  std::vector<float> lp_kept(size_t(rows) * V), lp_plain(lp_kept.size());
  std::vector<int32_t> last{1, 3, 1, 5, 1, 6}, parents{0, 1, 2, 3, 4, 5};  // each row its own history
  kept.model->begin_decode(kept.store, b, 2);
  plain.model->begin_decode(plain.store, b, 2);
  for (int step = 0; step < 3; ++step) {
    kept.model->decode_step(kept.store, step, last.data(), parents.data(), rows, lp_kept.data());
    plain.model->decode_step(plain.store, step, last.data(), parents.data(), rows, lp_plain.data());
    ASSERT_EQ(lp_kept, lp_plain) << "decode step " << step;
    for (int r = 0; r < rows; ++r) last[size_t(r)] = 3 + (r + 2 * step) % 9;
    parents = {1, 0, 2, 2, 5, 4};  // swaps and a copy: the reorder of the (bf16) caches
  }
  // fp32 ignores the setting.
  TinyModel fp32_a(0.2f, 2, 0.1f, Precision::fp32, true), fp32_b(0.2f, 2, 0.1f, Precision::fp32, false);
  EXPECT_EQ(fp32_a.model->activation_bytes(), fp32_b.model->activation_bytes());
}

}  // namespace
