// What the translation workloads (gnmt, transformer) share with their models: a batch of sentence
// pairs as the models take it, and the interface a model gives the shared workload
// (translation_workload.h) for training and for beam-search decoding.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/param_store.h"

namespace mlpd {

// Token ids of the prepared data (src/translation/bpe.h): pad 0, bos 1, eos 2, unk 3.
inline constexpr int32_t kPadToken = 0;
inline constexpr int32_t kBosToken = 1;
inline constexpr int32_t kEosToken = 2;

// One rank's sentences of a step, padded, in HOST memory (a model copies what it needs).
struct TranslationBatch {
  int batch = 0;                     // sentences
  int src_len = 0;                   // padded source length: the longest source
  int tgt_len = 0;                   // padded target length: the longest target + 1 (bos / eos)
  std::vector<int32_t> src;          // [batch, src_len], tokens then pad
  std::vector<int32_t> src_lengths;  // [batch], each >= 1
  std::vector<int32_t> tgt_in;       // [batch, tgt_len]: bos, tokens, pad...
  std::vector<int32_t> tgt_out;      // [batch, tgt_len]: tokens, eos, pad...
  std::vector<int32_t> tgt_lengths;  // [batch]: tokens + 1
};

// The largest shapes a model is built for: no allocation in a step.
struct Seq2SeqLimits {
  int max_batch = 1;        // training sentences per rank
  int max_src_len = 1;      // tokens, after the max_sequence_length rule
  int max_tgt_len = 1;      // tokens + 1
  int max_eval_batch = 1;   // sentences decoded together
  int max_beam = 1;
  int max_decode_len = 1;   // decoder steps, eos included
};

// What every translation model checks of its vocabulary, limits and dropout before building:
// UserError naming `model` (exit 2 for what a config sets).
void check_seq2seq_spec(const char* model, int vocab, const Seq2SeqLimits& lim, float dropout);

// A translation model on one device. Parameters live in the workload's ParamStore (views).
struct Seq2Seq {
  virtual ~Seq2Seq() = default;
  virtual void init_parameters(ParamStore& store, uint64_t seed) const = 0;
  // Forward and backward of one batch: accumulates into store.grads the gradients of the
  // label-smoothed cross-entropy summed over target tokens and scaled by grad_scale, calls ready
  // (nullable) with each view once its gradient is final (reverse view order), and adds the unscaled
  // loss sum to *loss_sum (nullable; a double in the memory of the model's device, as every loss op's).
  // Dropout masks are drawn from (dropout_seed, element offset).
  virtual void train_batch(ParamStore& store, const TranslationBatch& b, float grad_scale, uint64_t dropout_seed,
                           double* loss_sum, const std::function<void(size_t)>& ready) = 0;
  // Decoding (no dropout): begin_decode encodes b's sources for `beam` hypotheses each; then
  // decode_step is beam_search's callback (src/translation/beam_search.h): for each of rows =
  // b.batch * beam hypotheses its last token and the row of the previous step it continues, and
  // it writes log-probabilities [rows, vocab] to HOST memory.
  virtual void begin_decode(const ParamStore& store, const TranslationBatch& b, int beam) = 0;
  virtual void decode_step(const ParamStore& store, int step, const int32_t* last_tokens, const int32_t* parents,
                           int rows, float* log_probs) = 0;
  virtual std::string summary(const ParamStore& store) const = 0;
  // Dense FLOPs of forward + backward per (source + target) token, for throughput figures.
  virtual double train_flops_per_token() const = 0;
  // Bytes of the model's activation, gradient and decoding buffers on its device.
  virtual size_t activation_bytes() const = 0;
};

// Host log-softmax of each row of logits [rows, vocab] (the decoders' last step).
void log_softmax_rows(const float* logits, int rows, int vocab, float* out);

}  // namespace mlpd
