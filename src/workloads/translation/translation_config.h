// The keys gnmt and transformer share, typed: read once from the resolved, rule-checked config.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mlpd {

// Config keys of ours shared by the translation workloads.
inline constexpr const char* kMaxSequenceMethod = "max_sequence_length_method";  // discard | truncate
inline constexpr const char* kLabelSmoothing = "label_smoothing";
inline constexpr const char* kDropout = "dropout";
inline constexpr const char* kEvalBeamSize = "eval_beam_size";
inline constexpr const char* kEvalLengthPenalty = "eval_length_penalty";
inline constexpr const char* kEvalBatchSize = "eval_batch_size";

struct TranslationConfig {
  int64_t global_batch = 0;     // sentence pairs per step, over all ranks
  int max_sequence_length = 0;  // tokens of one side (without bos/eos)
  std::string max_sequence_method = "discard";  // MLPerf: truncate or discard longer training pairs
  float label_smoothing = 0.1f;
  float dropout = 0.1f;
  int eval_beam_size = 4;
  float eval_length_penalty = 0.6f;  // GNMT's alpha: ((5 + len) / 6)^alpha
  int eval_batch_size = 32;          // sentences decoded together on one rank
  uint64_t seed = 0;
};

// UserError (exit 2) on a value out of range.
TranslationConfig read_translation_config(const nlohmann::json& config);

}  // namespace mlpd
