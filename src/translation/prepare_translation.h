// `prepare` for the translation workloads (gnmt, transformer): sentence pairs -> train/test split
// -> joint BPE learned on the train split -> the HDF5 file of translation_data.h.
//   mini:      Debian's trans-de-en dictionary (/usr/share/trans/de-en, or request.from: another
//              copy), German -> English, pairs chosen by the rule of parallel_corpus.h, split by
//              split_train_test; vocabulary 4000 unless request.vocab_size > 0.
//   reference: plain-text parallel files request.from_parallel_src / _tgt (WMT En-De), the test
//              split from request.test_parallel_src / _tgt when given (newstest2014) or else by
//              split_train_test; vocabulary 32000 unless request.vocab_size > 0. The language
//              codes are the files' extensions when they look like one (train.en -> "en").
// UserError (exit 2) for a missing source or a bad request; the file is written atomically.
#pragma once
#include <string>

#include "workloads/registry.h"

namespace mlpd {

inline constexpr const char* kTransDeEnPath = "/usr/share/trans/de-en";
inline constexpr int kMiniVocabSize = 4000;
inline constexpr int kReferenceVocabSize = 32000;

void prepare_translation(const PrepareRequest& request, const std::string& benchmark);

}  // namespace mlpd
