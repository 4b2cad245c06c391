// The padded batch the translation model tests share (tests/nn/{gnmt,transformer}_model_test.cpp).
#pragma once
#include "workloads/translation/seq2seq.h"

namespace mlpd::test {

// Three pairs of different lengths, tokens below 11: sources 4, 2, 3 tokens; targets (with eos)
// 3, 4, 2. Padding at src[6, 7, 11] and tgt[3, 10, 11].
inline TranslationBatch tiny_translation_batch() {
  TranslationBatch b;
  b.batch = 3;
  b.src_len = 4;
  b.tgt_len = 4;
  b.src = {5, 6, 7, 8, /**/ 9, 4, 0, 0, /**/ 10, 3, 5, 0};
  b.src_lengths = {4, 2, 3};
  b.tgt_in = {1, 7, 8, 0, /**/ 1, 9, 9, 10, /**/ 1, 4, 0, 0};
  b.tgt_out = {7, 8, 2, 0, /**/ 9, 9, 10, 2, /**/ 4, 2, 0, 0};
  b.tgt_lengths = {3, 4, 2};
  return b;
}

}  // namespace mlpd::test
