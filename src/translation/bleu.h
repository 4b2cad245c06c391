// Corpus BLEU exactly as sacreBLEU 2.x computes it with its defaults (one reference, n-gram orders
// 1-4, tokenizer "13a", "exp" smoothing, no effective order), from sufficient statistics so that a
// distributed evaluation sums the statistics of its shards (an allreduce of 10 numbers) and scores
// once.
//
// Contract:
// - Text is UTF-8. Segments are pre-processed as sacreBLEU does: trailing whitespace stripped
//   (Python's str.rstrip, Unicode whitespace), optionally lowercased (Python's str.lower, Unicode
//   14.0 mappings), then tokenized. Invalid UTF-8 is not rejected here (each bad byte counts as
//   a non-space character); the CLI rejects it first.
// - Tokenizer "13a" is mteval-v13a's: <skipped> removed, "-\n" joins lines, other newlines become
//   spaces, &quot; &amp; &lt; &gt; replaced (in that order), then ASCII punctuation and symbols
//   split off, "." and "," split off unless between digits on the side tested, "-" split off after
//   a digit. Tokens are then the runs between Unicode whitespace (Python's str.split). "none"
//   only splits on whitespace.
// - Statistics are integer counts (exact when summed in any order); as doubles they are exact up
//   to 2^53, ample for any test set.
// - Score: precisions p_n = 100 * matches_n / totals_n in percent; an order with no match (while
//   some lower or higher order matched) gets sacreBLEU's "exp" smoothing, p_n = 100 / (2^k totals_n)
//   for the k-th such order; if no n-gram of any order matches, or an order has no n-gram at all,
//   BLEU is 0 (as sacreBLEU). BLEU = BP * exp(mean log p_n), BP = exp(1 - ref_len / hyp_len) when
//   hyp_len < ref_len (0 for an empty output), else 1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpd {

inline constexpr int kBleuMaxOrder = 4;

enum class BleuTokenizer { k13a, kNone };

struct BleuOptions {
  BleuTokenizer tokenize = BleuTokenizer::k13a;
  bool lowercase = false;
};

// "13a" / "none" (sacreBLEU's names); nullopt for any other name.
std::optional<BleuTokenizer> parse_bleu_tokenizer(std::string_view name);
const char* bleu_tokenizer_name(BleuTokenizer t);

// Sufficient statistics of one sentence or a whole corpus; they add up.
struct BleuStats {
  int64_t matches[kBleuMaxOrder] = {};  // clipped n-gram matches, order n at [n-1]
  int64_t totals[kBleuMaxOrder] = {};   // hypothesis n-grams, order n at [n-1]
  int64_t hyp_len = 0;                  // hypothesis tokens
  int64_t ref_len = 0;                  // reference tokens

  static constexpr int kSize = 2 * kBleuMaxOrder + 2;
  // [matches 1-4, totals 1-4, hyp_len, ref_len], for an allreduce (sum) and back.
  std::vector<double> to_vector() const;
  static BleuStats from_vector(const std::vector<double>& v);  // v.size() == kSize, whole numbers

  BleuStats& operator+=(const BleuStats& o);
  bool operator==(const BleuStats& o) const = default;
};

struct BleuScore {
  double score = 0;                          // 0-100
  double precisions[kBleuMaxOrder] = {};     // percent, as sacreBLEU reports them (smoothed)
  double bp = 0;                             // brevity penalty
  double ratio = 0;                          // hyp_len / ref_len (0 when ref_len is 0)
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
};

// The pre-processing and tokenization sacreBLEU applies to each segment: the tokens joined by
// single spaces.
std::string bleu_preprocess(std::string_view segment, const BleuOptions& opts);
std::string tokenize_13a(std::string_view line);
// Python's str.lower() on UTF-8 text (Unicode 14.0 simple mappings, U+0130 -> "i\u0307", final
// sigma by an approximation of Unicode's Cased/Case_Ignorable properties).
std::string unicode_lower(std::string_view utf8);
// Python's str.split(): the runs between Unicode whitespace.
std::vector<std::string_view> split_unicode_whitespace(std::string_view utf8);
// Strict UTF-8 (as Python's decoder: no overlongs, no surrogates, <= U+10FFFF). On failure, the
// byte offset of the first bad sequence in *bad_offset.
bool is_valid_utf8(std::string_view s, size_t* bad_offset = nullptr);

BleuStats sentence_bleu_stats(std::string_view hyp, std::string_view ref, const BleuOptions& opts);
BleuScore corpus_bleu(const BleuStats& stats);
// Convenience: the statistics of every pair, summed, then scored. hyps.size() == refs.size().
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& opts);

// sacreBLEU's line, as Python's str(BLEUScore) (= `sacrebleu -f text -w 2` without its signature):
// "BLEU = 27.31 60.1/33.4/20.6/13.0 (BP = 0.982 ratio = 0.982 hyp_len = 1234 ref_len = 1256)".
// `width`: decimals of the score (sacreBLEU's --width).
std::string format_sacrebleu(const BleuScore& s, int width = 2);

}  // namespace mlpd
