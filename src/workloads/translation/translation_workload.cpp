#include "workloads/translation/translation_workload.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/sampling.h"
#include "mlperf/keys.h"
#include "translation/beam_search.h"
#include "translation/bleu.h"
#include "translation/bpe.h"
#include "translation/translation_data.h"
#include "workloads/registry.h"

namespace mlpd {

inline constexpr uint64_t kBatchOrderStream = 0x424F'5244'0000'0000ull;  // "BORD" + epoch
inline constexpr uint64_t kDropoutSeedStream = 0x4453'4544'0000'0000ull; // "DSED"

void log_softmax_rows(const float* logits, int rows, int vocab, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<size_t>(r) * static_cast<size_t>(vocab);
    float* y = out + static_cast<size_t>(r) * static_cast<size_t>(vocab);
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < vocab; ++j) mx = std::max(mx, x[j]);
    double sum = 0.0;
    for (int j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(x[j] - mx));
    const auto lse = static_cast<float>(static_cast<double>(mx) + std::log(sum));
    for (int j = 0; j < vocab; ++j) y[j] = x[j] - lse;
  }
}

namespace {

constexpr int64_t kBatchesPerPool = 16;

// One pair's tokens, after the max_sequence_length rule.
struct PairRef {
  int64_t index = 0;  // into the split
  int32_t src_len = 0, tgt_len = 0;
};

struct TranslationWorkload final : Workload {
  TranslationWorkloadSpec spec;
  TranslationData data;
  std::unique_ptr<Seq2Seq> model;
  std::vector<PairRef> train;          // the pairs trained on
  std::vector<int64_t> eval_order;     // this rank's test pairs, in decoding order
  std::vector<int64_t> order;          // the epoch's global batches, back to back (indices into train)
  std::vector<int64_t> perm;
  int order_epoch = -1;
  int rank = 0, ranks = 1;
  Seq2SeqLimits limits;
  TranslationBatch batch;
  std::vector<float> log_probs;
  StepLoss step_loss;

  void init_parameters(uint64_t seed) override { model->init_parameters(store, seed); }
  StepStats train_step(int epoch, int64_t step, GradReady ready) override;
  EvalPartial evaluate() override;
  EvalOutcome finish_evaluation(const EvalCombined& c) override {
    const BleuScore score = corpus_bleu(BleuStats::from_vector(c.sums));
    if (rank == 0) spdlog::info("eval: {} ({} test sentences)", format_sacrebleu(score), data.test.size());
    return {score.score / 100.0, {}, static_cast<double>(data.test.size())};
  }

  void plan_epoch(int epoch);
  void fill_training_batch(const int64_t* ids, int64_t n);
  void fill_source_batch(const int64_t* ids, int64_t n);
};

std::span<const int32_t> tokens_of(const std::vector<int32_t>& tokens, const std::vector<int64_t>& offsets, int64_t i) {
  const auto b = static_cast<size_t>(offsets[static_cast<size_t>(i)]);
  const auto e = static_cast<size_t>(offsets[static_cast<size_t>(i) + 1]);
  return {tokens.data() + b, e - b};
}

void TranslationWorkload::plan_epoch(int epoch) {
  const auto n = static_cast<int64_t>(train.size());
  const int64_t G = facts.global_batch;
  const int64_t nb = facts.steps_per_epoch;
  epoch_permutation(spec.config.seed, epoch, n, perm);
  order.assign(perm.begin(), perm.begin() + nb * G);
  const int64_t pool = kBatchesPerPool * G;
  for (int64_t p = 0; p < nb * G; p += pool) {
    const auto first = order.begin() + p, last = order.begin() + std::min(p + pool, nb * G);
    std::stable_sort(first, last, [this](int64_t a, int64_t b) {
      const PairRef& x = train[static_cast<size_t>(a)];
      const PairRef& y = train[static_cast<size_t>(b)];
      return std::max(x.src_len, x.tgt_len) < std::max(y.src_len, y.tgt_len);
    });
  }
  // The batches in a seeded order (Fisher-Yates over whole batches).
  std::vector<int64_t> shuffled(order.size());
  std::vector<int64_t> batch_perm(static_cast<size_t>(nb));
  std::iota(batch_perm.begin(), batch_perm.end(), 0);
  const uint64_t stream = kBatchOrderStream + static_cast<uint64_t>(static_cast<uint32_t>(epoch));
  for (int64_t i = nb - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng_below(spec.config.seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i + 1)));
    std::swap(batch_perm[static_cast<size_t>(i)], batch_perm[static_cast<size_t>(j)]);
  }
  for (int64_t b = 0; b < nb; ++b)
    std::copy_n(order.begin() + batch_perm[static_cast<size_t>(b)] * G, G, shuffled.begin() + b * G);
  order.swap(shuffled);
  order_epoch = epoch;
}

void TranslationWorkload::fill_training_batch(const int64_t* ids, int64_t n) {
  TranslationBatch& b = batch;
  b.batch = static_cast<int>(n);
  b.src_len = 1;
  b.tgt_len = 1;
  for (int64_t i = 0; i < n; ++i) {
    const PairRef& p = train[static_cast<size_t>(ids[i])];
    b.src_len = std::max<int>(b.src_len, p.src_len);
    b.tgt_len = std::max<int>(b.tgt_len, p.tgt_len + 1);
  }
  const auto S = static_cast<size_t>(b.src_len), T = static_cast<size_t>(b.tgt_len);
  b.src.assign(static_cast<size_t>(n) * S, kPadToken);
  b.tgt_in.assign(static_cast<size_t>(n) * T, kPadToken);
  b.tgt_out.assign(static_cast<size_t>(n) * T, kPadToken);
  b.src_lengths.resize(static_cast<size_t>(n));
  b.tgt_lengths.resize(static_cast<size_t>(n));
  const TokenizedSplit& split = data.train;
  for (int64_t i = 0; i < n; ++i) {
    const PairRef& p = train[static_cast<size_t>(ids[i])];
    const auto src = tokens_of(split.src_tokens, split.src_offsets, p.index);
    const auto tgt = tokens_of(split.tgt_tokens, split.tgt_offsets, p.index);
    const auto row = static_cast<size_t>(i);
    std::copy_n(src.begin(), p.src_len, b.src.begin() + static_cast<std::ptrdiff_t>(row * S));
    b.src_lengths[row] = p.src_len;
    b.tgt_in[row * T] = kBosToken;
    std::copy_n(tgt.begin(), p.tgt_len, b.tgt_in.begin() + static_cast<std::ptrdiff_t>(row * T + 1));
    std::copy_n(tgt.begin(), p.tgt_len, b.tgt_out.begin() + static_cast<std::ptrdiff_t>(row * T));
    b.tgt_out[row * T + static_cast<size_t>(p.tgt_len)] = kEosToken;
    b.tgt_lengths[row] = p.tgt_len + 1;
  }
}

void TranslationWorkload::fill_source_batch(const int64_t* ids, int64_t n) {
  TranslationBatch& b = batch;
  const TokenizedSplit& split = data.test;
  b.batch = static_cast<int>(n);
  b.src_len = 1;
  for (int64_t i = 0; i < n; ++i)
    b.src_len = std::max<int>(b.src_len, static_cast<int>(tokens_of(split.src_tokens, split.src_offsets, ids[i]).size()));
  const auto S = static_cast<size_t>(b.src_len);
  b.src.assign(static_cast<size_t>(n) * S, kPadToken);
  b.src_lengths.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto src = tokens_of(split.src_tokens, split.src_offsets, ids[i]);
    std::copy(src.begin(), src.end(), b.src.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * S));
    // An empty source still has one (pad) position for the encoder to attend to.
    b.src_lengths[static_cast<size_t>(i)] = std::max<int32_t>(1, static_cast<int32_t>(src.size()));
  }
  b.tgt_len = 0;
}

StepStats TranslationWorkload::train_step(int epoch, int64_t step, GradReady ready) {
  if (order_epoch != epoch) plan_epoch(epoch);
  const Slice sl = rank_slice_of_batch(step, facts.global_batch, rank, ranks);
  fill_training_batch(order.data() + sl.begin, sl.count);  // sl: positions in the epoch order
  const uint64_t counter = (static_cast<uint64_t>(static_cast<uint32_t>(epoch)) << 40) ^
                           (static_cast<uint64_t>(step) << 12) ^ static_cast<uint64_t>(rank);
  const uint64_t dropout_seed = rng_u64(spec.config.seed, kDropoutSeedStream, counter);
  StepStats st;
  st.loss = &step_loss;
  model->train_batch(store, batch, 1.0f / static_cast<float>(facts.global_batch), dropout_seed,
                     begin_step_loss(step_loss), [&ready](size_t view) { ready(view); });
  double src_tokens = 0, tgt_tokens = 0;
  for (int i = 0; i < batch.batch; ++i) {
    src_tokens += batch.src_lengths[static_cast<size_t>(i)];
    tgt_tokens += batch.tgt_lengths[static_cast<size_t>(i)];
  }
  st.loss_weight = tgt_tokens;
  st.work = src_tokens + tgt_tokens;
  return st;
}

EvalPartial TranslationWorkload::evaluate() {
  const TranslationConfig& cfg = spec.config;
  BleuOptions bleu;
  bleu.lowercase = spec.lowercase_bleu;
  BleuStats stats;
  const int beam = cfg.eval_beam_size;
  const int vocab = static_cast<int>(data.bpe.symbols.size());
  DecodeModel dm;
  dm.vocab = vocab;
  dm.step = [this](int step, const int32_t* last, const int32_t* parents, int rows, float* lp) {
    model->decode_step(store, step, last, parents, rows, lp);
  };
  std::string hyp;
  for (size_t first = 0; first < eval_order.size(); first += static_cast<size_t>(cfg.eval_batch_size)) {
    const int64_t n = std::min<int64_t>(cfg.eval_batch_size, static_cast<int64_t>(eval_order.size() - first));
    fill_source_batch(eval_order.data() + first, n);
    model->begin_decode(store, batch, beam);
    DecodeOptions opts;
    opts.beam = beam;
    opts.length_penalty = cfg.eval_length_penalty;
    opts.max_len = std::min(limits.max_decode_len, 2 * batch.src_len + 10);
    opts.bos = kBosToken;
    opts.eos = kEosToken;
    const std::vector<std::vector<int32_t>> best = beam_search(batch.batch, dm, opts);
    for (int64_t i = 0; i < n; ++i) {
      hyp = decode(data.bpe, best[static_cast<size_t>(i)]);
      const auto pair = static_cast<size_t>(eval_order[first + static_cast<size_t>(i)]);
      stats += sentence_bleu_stats(hyp, data.test.tgt_text[pair], bleu);
      // --log-level debug: a sample of what the model says, beside what it should.
      if (first + static_cast<size_t>(i) < 3 || (first + static_cast<size_t>(i)) % 200 == 0)
        spdlog::debug("eval: {} => {} (reference: {})", data.test.src_text[pair], hyp, data.test.tgt_text[pair]);
    }
  }
  return {stats.to_vector(), {}};
}

}  // namespace

std::unique_ptr<Workload> make_translation_workload(const WorkloadContext& ctx, const TranslationWorkloadSpec& spec) {
  const TranslationConfig& cfg = spec.config;
  auto w = std::make_unique<TranslationWorkload>();
  w->spec = spec;
  w->rank = ctx.rank;
  w->ranks = ctx.ranks;
  w->data = load_translation_data(workload_data_path(ctx.data_dir, spec.benchmark, ctx.scale));
  const TranslationData& data = w->data;
  const int L = cfg.max_sequence_length;
  const bool truncate = cfg.max_sequence_method == "truncate";
  int longest = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(data.train.size()); ++i) {
    const auto s = static_cast<int32_t>(tokens_of(data.train.src_tokens, data.train.src_offsets, i).size());
    const auto t = static_cast<int32_t>(tokens_of(data.train.tgt_tokens, data.train.tgt_offsets, i).size());
    if (s < 1 || t < 1) continue;
    if (!truncate && (s > L || t > L)) continue;
    w->train.push_back({i, std::min<int32_t>(s, L), std::min<int32_t>(t, L)});
    longest = std::max({longest, std::min(s, L), std::min(t, L)});
  }
  WorkloadFacts& f = w->facts;
  f.global_batch = cfg.global_batch;
  MLPD_CHECK(f.global_batch > 0 && f.global_batch % ctx.ranks == 0, "global batch not checked by the rules");
  const auto kept = static_cast<int64_t>(w->train.size());
  if (kept < f.global_batch)
    throw UserError(spec.benchmark + ": " + std::to_string(kept) + " training pairs within max_sequence_length " +
                        std::to_string(L) + ", fewer than global_batch_size " + std::to_string(f.global_batch),
                    2);
  f.steps_per_epoch = batches_per_epoch(kept, f.global_batch);
  f.train_samples = static_cast<int64_t>(data.train.size());
  f.eval_samples = static_cast<int64_t>(data.test.size());
  f.work_unit = "tokens";
  f.eval_every_epochs = 1;
  f.eval_kind = EvalKind::Sums;
  f.logged_params.push_back({keys::kMaxSequenceLength, L, {{keys::kMethod, cfg.max_sequence_method}}});

  // Test pairs by source length (ties by index), dealt round-robin over the ranks.
  std::vector<int64_t> test(static_cast<size_t>(data.test.size()));
  std::iota(test.begin(), test.end(), 0);
  auto src_len = [&data](int64_t i) { return tokens_of(data.test.src_tokens, data.test.src_offsets, i).size(); };
  std::stable_sort(test.begin(), test.end(), [&](int64_t a, int64_t b) { return src_len(a) < src_len(b); });
  size_t longest_test = 1;
  for (size_t p = static_cast<size_t>(ctx.rank); p < test.size(); p += static_cast<size_t>(ctx.ranks))
    w->eval_order.push_back(test[p]);
  for (int64_t i : test) longest_test = std::max(longest_test, src_len(i));

  Seq2SeqLimits& lim = w->limits;
  lim.max_batch = static_cast<int>(f.global_batch / ctx.ranks);
  lim.max_src_len = std::max(longest, static_cast<int>(longest_test));
  lim.max_tgt_len = longest + 1;
  lim.max_eval_batch = cfg.eval_batch_size;
  lim.max_beam = cfg.eval_beam_size;
  lim.max_decode_len = 2 * lim.max_src_len + 10;
  const int vocab = static_cast<int>(data.bpe.symbols.size());
  w->model = spec.build_model(lim, vocab, w->store);
  w->step_loss = make_step_loss(ctx.device, 1);
  finalize_params(w->store);
  f.model_summary = w->model->summary(w->store) + "; " + std::to_string(kept) + " of " +
                    std::to_string(data.train.size()) + " training pairs within " + std::to_string(L) + " tokens (" +
                    cfg.max_sequence_method + "), " + std::to_string(f.steps_per_epoch) + " steps of " +
                    std::to_string(f.global_batch) + " pairs per epoch";
  f.flops_per_sample = w->model->train_flops_per_token();
  f.activation_bytes = int64_t(w->model->activation_bytes());
  return w;
}

}  // namespace mlpd
