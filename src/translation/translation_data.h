// The prepared data of the translation workloads (gnmt, transformer): a joint BPE vocabulary and
// the train and test sentence pairs as token arrays, in one HDF5 file.
//
// HDF5 layout (every dataset 1-D and contiguous unless said; "text" datasets hold UTF-8 bytes, the
// i-th string being bytes [offsets[i], offsets[i+1])):
//   root attrs        format, format_version (datasets/layout.h), benchmark, scale, source, licence,
//                     created_by, src_lang, tgt_lang, vocab_size (int64), selection (the rule
//                     that chose the pairs, or the input files), split (the train/test rule)
//   /vocab/symbols         uint8  [B]      the symbols' texts, concatenated (bpe.h: ids 0-3 the
//   /vocab/symbol_offsets  int64  [V+1]    specials, then the base characters, then the merges)
//   /vocab/merges          int32  [M, 2]   merge k = (left, right) makes id V - M + k
//   /train, /test     attr count (int64): the pairs P of the split
//     src_tokens      int32  [S]      every source sentence's tokens, back to back (no bos/eos:
//     src_offsets     int64  [P+1]    the models add them); pair i is [offsets[i], offsets[i+1])
//     tgt_tokens      int32  [T]      the same for the target side
//     tgt_offsets     int64  [P+1]
//   /test only:
//     src_text, src_text_offsets      uint8 [..], int64 [P+1]: the source sentences as read
//     tgt_text, tgt_text_offsets      uint8 [..], int64 [P+1]: the reference translations, what
//                                     BLEU is scored against
// Offsets start at 0, never decrease and end at their array's length; token ids lie in [0, V).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "translation/bpe.h"
#include "translation/parallel_corpus.h"

namespace mlpd {

struct TokenizedSplit {
  std::vector<int32_t> src_tokens;
  std::vector<int64_t> src_offsets{0};  // [pairs + 1]
  std::vector<int32_t> tgt_tokens;
  std::vector<int64_t> tgt_offsets{0};  // [pairs + 1]
  std::vector<std::string> src_text;    // test: the sentences as read; train: empty
  std::vector<std::string> tgt_text;    // test: the references; train: empty

  int64_t size() const { return static_cast<int64_t>(src_offsets.size()) - 1; }
  std::span<const int32_t> src(int64_t i) const;
  std::span<const int32_t> tgt(int64_t i) const;
};

struct TranslationData {
  // Root attributes.
  std::string benchmark, scale, source, licence, created_by;
  std::string src_lang, tgt_lang;
  std::string selection, split_rule;
  Bpe bpe;
  TokenizedSplit train, test;
};

// Encodes the pairs with `bpe`; keep_text also stores the sentences themselves (the test split).
TokenizedSplit tokenize_pairs(const Bpe& bpe, const std::vector<SentencePair>& pairs, bool keep_text);

// Writes `data` to `path` through write_h5_atomically (nothing half-written under `path`).
// UserError naming the file on failure.
void write_translation_data(const std::string& path, const TranslationData& data);

// Reads and checks a prepared file (the checks of check_translation_data). UserError (exit 2)
// naming the file and the dataset or attribute at fault, and the prepare command.
TranslationData load_translation_data(const std::string& path);

// The checks without keeping the data: the attributes present; every dataset present with its
// dtype and the extents the counts give, stored in full; offsets monotone from 0 to their array's
// length; token ids in [0, vocab_size); the vocabulary consistent (make_bpe). Token arrays are
// streamed in blocks, never held whole. UserError (exit 2) as load_translation_data.
void check_translation_data(const std::string& path);

}  // namespace mlpd
