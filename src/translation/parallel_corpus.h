// Parallel corpora for the translation workloads (gnmt, transformer): sentence pairs read from
// Debian's trans-de-en dictionary (mini) or from plain-text parallel files (reference, WMT En-De),
// and the fixed rule that splits them into train and test.
//
// The mini corpus (part of the benchmark's definition; changing it changes every result):
// the Ding dictionary (/usr/share/trans/de-en) has one entry a line, `DE | DE2 | ... :: EN | EN2 | ...`,
// '#' lines being comments. From each entry:
//   1. the two sides are split at " | " into aligned alternatives; an entry whose two sides have
//      different counts is skipped (the alignment is unknown);
//   2. in each alternative, only the text before the first "; " is kept (the first variant);
//      annotations {..}, [..] and <..> are removed; runs of whitespace become one space, the ends
//      are trimmed, and a space left before . , ? ! ; : (where an annotation was) is removed;
//   3. the pair is kept when both sides look like sentences: they end in '.', '?' or '!'; have at
//      least 3 words; do not start with an ASCII lower-case letter (a phrase: "im Gegensatz zu
//      etw."); do not end in a placeholder abbreviation (etw. jd. jdn. jdm. jds. sb. sth. usw.
//      etc., also "jd./etw."); hold no ellipsis ("..." or U+2026: a placeholder or a fragment);
//      and the English side holds no '/' (inline alternatives, "film /movie": BLEU is scored
//      against the English, which must be one sentence);
//   4. the pairs are deduplicated by their German sentence, the first in file order kept.
// src = German, tgt = English: the mini task is German -> English. On the trans-de-en of
// Debian 12 (devel 2023-01-30) this keeps 17,660 pairs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlpd {

struct SentencePair {
  std::string src;
  std::string tgt;
  bool operator==(const SentencePair&) const = default;
};

// What the Ding reader saw (for the prepare log).
struct DingStats {
  int64_t lines = 0;               // non-comment, non-empty lines with " :: "
  int64_t mismatched_lines = 0;    // skipped: alternative counts differ between the sides
  int64_t alternatives = 0;        // aligned alternatives examined
  int64_t duplicates = 0;          // sentence pairs dropped because their German was seen before
};

// The rule above applied to the text of a Ding dictionary (the whole file's content).
std::vector<SentencePair> ding_sentence_pairs(std::string_view text, DingStats* stats = nullptr);
// The same on a file; UserError (exit 2) naming the file when it cannot be read.
std::vector<SentencePair> read_ding_sentence_pairs(const std::string& path, DingStats* stats = nullptr);

// One alternative of a Ding entry cleaned by step 2 (exposed for tests).
std::string ding_clean_alternative(std::string_view alternative);

// Plain-text parallel files: one sentence a line, UTF-8, the same number of lines (a trailing
// '\r' is removed, the ends trimmed). A pair with an empty (or all-blank) side is dropped.
// UserError (exit 2) naming both files and their line counts when the counts differ, or naming
// the file that cannot be read.
std::vector<SentencePair> read_parallel_files(const std::string& src_path, const std::string& tgt_path);

// 64-bit FNV-1a of the bytes of `s`.
uint64_t fnv1a64(std::string_view s);

// The train/test rule, independent of the pairs' order: a pair is in test when
// fnv1a64(src) % modulus == 0. The modulus starts at 16 and is halved (16, 8, 4, 2) while the test
// set would hold fewer than `min_test` pairs; UserError (exit 2) when even 2 leaves fewer. Within
// each split the pairs keep their input order.
struct TrainTestSplit {
  std::vector<SentencePair> train, test;
  uint64_t modulus = 16;
};
inline constexpr int64_t kMinTestPairs = 1000;
TrainTestSplit split_train_test(const std::vector<SentencePair>& pairs, int64_t min_test = kMinTestPairs);

}  // namespace mlpd
