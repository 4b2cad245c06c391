#include "workloads/translation/translation_config.h"

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {

TranslationConfig read_translation_config(const nlohmann::json& c) {
  TranslationConfig r;
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.max_sequence_length = c.at(keys::kMaxSequenceLength).get<int>();
  r.max_sequence_method = c.at(kMaxSequenceMethod).get<std::string>();
  r.label_smoothing = c.at(kLabelSmoothing).get<float>();
  r.dropout = c.at(kDropout).get<float>();
  r.eval_beam_size = c.at(kEvalBeamSize).get<int>();
  r.eval_length_penalty = c.at(kEvalLengthPenalty).get<float>();
  r.eval_batch_size = c.at(kEvalBatchSize).get<int>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  if (r.max_sequence_length < 1 || r.max_sequence_length > 1024)
    throw UserError("max_sequence_length must lie in 1..1024", 2);
  if (r.max_sequence_method != "discard" && r.max_sequence_method != "truncate")
    throw UserError("max_sequence_length_method = " + r.max_sequence_method + ": use discard or truncate", 2);
  if (!(r.label_smoothing >= 0.0f && r.label_smoothing < 1.0f)) throw UserError("label_smoothing must lie in [0, 1)", 2);
  if (!(r.dropout >= 0.0f && r.dropout < 1.0f)) throw UserError("dropout must lie in [0, 1)", 2);
  if (r.eval_beam_size < 1 || r.eval_beam_size > 64) throw UserError("eval_beam_size must lie in 1..64", 2);
  if (!(r.eval_length_penalty >= 0.0f && r.eval_length_penalty <= 10.0f))
    throw UserError("eval_length_penalty must lie in [0, 10]", 2);
  if (r.eval_batch_size < 1 || r.eval_batch_size > 4096) throw UserError("eval_batch_size must lie in 1..4096", 2);
  return r;
}

}  // namespace mlpd
