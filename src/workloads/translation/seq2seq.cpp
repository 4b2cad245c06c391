#include "workloads/translation/seq2seq.h"

#include "core/check.h"

namespace mlpd {

void check_seq2seq_spec(const char* model, int vocab, const Seq2SeqLimits& lim, float dropout) {
  const std::string m = model;
  if (vocab < 4) throw UserError(m + ": the vocabulary needs at least the 4 special tokens", 2);
  if (!(dropout >= 0.0f && dropout < 1.0f)) throw UserError(m + ": dropout must lie in [0, 1)", 2);
  MLPD_CHECK(lim.max_batch >= 1 && lim.max_src_len >= 1 && lim.max_tgt_len >= 1 && lim.max_eval_batch >= 1 &&
                 lim.max_beam >= 1 && lim.max_decode_len >= 1,
             m + " limits must be positive");
}

}  // namespace mlpd
