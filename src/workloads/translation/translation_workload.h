// The workload gnmt and transformer share: the prepared sentence pairs (src/translation), the
// max_sequence_length rule, length-bucketed global batches, training through a Seq2Seq model, and
// evaluation by beam search over the whole test set scored with corpus BLEU as sacreBLEU does.
//
// Data order: epoch e's global batches are a function of (seed, e) only: the training pairs in a
// seeded permutation, cut into pools of 16 global batches, each pool sorted by length (less
// padding) and cut into global batches, and the batches themselves in a seeded order. Rank r of R
// takes the r-th contiguous share of each global batch (rank_slice_of_batch), so 1 and N ranks
// train on the same global batches. Dropout masks are drawn per rank and step, so runs at 1 and N
// ranks agree only with dropout 0 (the rank-equivalence test sets it so).
// Evaluation: the test set sorted by source length; rank r decodes positions r, r+R, r+2R, ... in
// batches of eval_batch_size, and returns its BLEU statistics (sums: matches and totals of orders
// 1-4, hypothesis and reference lengths); the metric is corpus BLEU / 100 (MLPerf logs 0.24 for 24.0).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "workloads/translation/seq2seq.h"
#include "workloads/translation/translation_config.h"
#include "workloads/workload.h"

namespace mlpd {

struct TranslationWorkloadSpec {
  std::string benchmark;          // the prepared file is <data_dir>/<benchmark>_<scale>.h5
  TranslationConfig config;
  bool lowercase_bleu = false;    // gnmt: uncased BLEU as MLPerf v0.6
  // Builds the model's views into the store (the caller finalizes it) and its buffers.
  std::function<std::unique_ptr<Seq2Seq>(const Seq2SeqLimits& limits, int vocab, ParamStore& store)> build_model;
};

std::unique_ptr<Workload> make_translation_workload(const WorkloadContext& ctx, const TranslationWorkloadSpec& spec);

}  // namespace mlpd
