// Batched beam search and greedy decoding, independent of the model: a step callback returns the
// next-token log-probabilities of every hypothesis, so the LSTM (gnmt) and the Transformer plug in
// alike, on CPU or GPU (the callback copies its log-probabilities to host memory).
//
// Contract:
// - Rows: batch * beam hypotheses at every step, row b*beam + k being sentence b, beam slot k. The
//   row count never changes: dead slots and the rows of finished sentences are pad rows (last token
//   eos, parent the row itself) whose log-probabilities are ignored; the model may compute anything
//   for them.
// - Step t (0-based) gives each row the token it ends in (bos at step 0) and the row of step t-1
//   it continues (identity at step 0): the model reorders its state/cache by `parents` before
//   computing, then writes log_probs[row * vocab + v] (host memory, overwritten) for every row. NaN
//   counts as -inf.
// - At step 0 only slot 0 of each sentence is live (the others start at -inf) so beams do not
//   duplicate. Candidates: every live slot's log-prob plus each token's; the best 2*beam of them,
//   ordered by summed log-probability (descending), then lower token id, then lower slot. Each eos
//   among them finishes a hypothesis; the first `beam` others are the next live slots, so finishing
//   does not shrink the beam.
// - Score of a finished hypothesis: summed log-probability (double) / lp(len), lp the GNMT length
//   penalty ((5 + len) / 6)^alpha (1 when alpha is 0), len its tokens including eos.
// - A sentence is done when it has `beam` finished hypotheses and the best of them is at least the
//   best score any live one could still reach (log-probs are <= 0, so a live hypothesis ends at most
//   at logp / lp(max_len)): stopping then never changes the answer. After max_len steps the live
//   hypotheses finish as they are (len = max_len, no eos). The answer is the best-scoring finished
//   hypothesis (the first found on a tie).
// - beam = 1 is greedy: the argmax token (lowest id on a tie) each step, done at eos or max_len.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace mlpd {

struct DecodeOptions {
  int beam = 4;                // 1: greedy
  float length_penalty = 0.6f; // GNMT's alpha in ((5 + len) / 6)^alpha; 0: none
  int max_len = 100;           // at most this many steps (tokens, eos included)
  int32_t bos = 1;
  int32_t eos = 2;
};

struct DecodeModel {
  int vocab = 0;
  // See the contract above: rows = batch * beam; fills log_probs [rows, vocab] on the host.
  std::function<void(int step, const int32_t* last_tokens, const int32_t* parents, int rows, float* log_probs)> step;
};

struct DecodedHypothesis {
  std::vector<int32_t> tokens;  // without bos and eos
  double log_prob = 0;          // summed log-probability (eos included when it ended in eos)
  double score = 0;             // log_prob / lp(len)
  bool ended_in_eos = false;    // false: cut at max_len
};

// ((5 + len) / 6)^alpha; 1 for alpha 0.
double gnmt_length_penalty(int len, float alpha);

// The best hypothesis of each sentence, with its scores.
std::vector<DecodedHypothesis> beam_search_hypotheses(int batch, const DecodeModel& model, const DecodeOptions& opts);
// The best hypothesis per sentence (tokens without bos/eos). beam = 1 is greedy.
std::vector<std::vector<int32_t>> beam_search(int batch, const DecodeModel& model, const DecodeOptions& opts);

}  // namespace mlpd
