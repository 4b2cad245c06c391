// BLEU against hand-computed cases and against sacreBLEU's own output.
#include "translation/bleu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace mlpd {
namespace {

std::string score_line(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                       BleuOptions opts = {}) {
  return format_sacrebleu(corpus_bleu(hyps, refs, opts));
}

// ---- The 13a tokenizer ----

TEST(Bleu, Tokenize13aSplitsPunctuationAsMteval) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  // Symbols always split; "'" and "-" between letters do not.
  EXPECT_EQ(tokenize_13a("don't it's 'quoted' well-known x-ray"), "don't it's 'quoted' well-known x-ray");
  EXPECT_EQ(tokenize_13a("He said \"no\" (twice) [sic] {ok} a/b a_b a~b a@b #1 50% a*b+c=d; e:f? g|h ^`\\"),
            "He said \" no \" ( twice ) [ sic ] { ok } a / b a _ b a ~ b a @ b # 1 50 % a * b + c = d ; e : f ? g | h "
            "^ ` \\");
}

TEST(Bleu, Tokenize13aNumbersKeepTheirCommasAndPeriods) {
  // "." and "," stay inside a number (digit on both sides), split off elsewhere.
  EXPECT_EQ(tokenize_13a("It costs $1,000.50."), "It costs $ 1,000.50 .");
  EXPECT_EQ(tokenize_13a("1,000 and 3.14, or 2.5."), "1,000 and 3.14 , or 2.5 .");
  // A digit on one side only: ".5" splits (the padded space before it is a non-digit), "5." too.
  EXPECT_EQ(tokenize_13a(".5 ,5 5. 5,"), ". 5 , 5 5 . 5 ,");
  EXPECT_EQ(tokenize_13a("U.S.A. e.g. ..."), "U . S . A . e . g . . . .");
}

TEST(Bleu, Tokenize13aDashesSplitOnlyAfterADigit) {
  EXPECT_EQ(tokenize_13a("pages 10-20 and well-known"), "pages 10 - 20 and well-known");
  EXPECT_EQ(tokenize_13a("x-ray 3-4 -5"), "x-ray 3 - 4 -5");
  // Non-ASCII dashes and typographic quotes are not mteval symbols: they stay attached.
  EXPECT_EQ(tokenize_13a("Er sagte: „Guten Tag“ – und ging."), "Er sagte : „Guten Tag“ – und ging .");
}

TEST(Bleu, Tokenize13aEntitiesSkippedTagsAndLineJoins) {
  EXPECT_EQ(tokenize_13a("&quot;Hi&quot; &amp; &lt;b&gt;"), "\" Hi \" & < b >");
  // Replaced in order (&amp; before &lt;), so "&amp;lt;" becomes "&lt;", then "<".
  EXPECT_EQ(tokenize_13a("&amp;lt;"), "<");
  EXPECT_EQ(tokenize_13a("a<skipped>b"), "ab");
  EXPECT_EQ(tokenize_13a("line-\nbreak"), "linebreak");
  EXPECT_EQ(tokenize_13a("two\nlines"), "two lines");
}

TEST(Bleu, Tokenize13aSplitsOnUnicodeWhitespace) {
  // Tab, NO-BREAK SPACE, THIN SPACE: Python's str.split() separators.
  EXPECT_EQ(tokenize_13a(" lead\there\u00a0nbsp\u2009thin  trail  "), "lead here nbsp thin trail");
  EXPECT_EQ(tokenize_13a("Straße, Ärger."), "Straße , Ärger .");
}

TEST(Bleu, LowercaseFollowsPythonStrLower) {
  EXPECT_EQ(unicode_lower("ÄRGER über ÖL-Preise, STRASSE"), "ärger über öl-preise, strasse");
  // Greek final sigma, and U+0130 which lowercases to two code points.
  EXPECT_EQ(unicode_lower("ΟΔΟΣ ΣΑΣ Σ. İstanbul ΑΣ, Σ'Α"), "οδος σας σ. i̇stanbul ας, σ'α");
}

TEST(Bleu, TokenizerNamesAndPreprocess) {
  EXPECT_EQ(parse_bleu_tokenizer("13a"), BleuTokenizer::k13a);
  EXPECT_EQ(parse_bleu_tokenizer("none"), BleuTokenizer::kNone);
  EXPECT_FALSE(parse_bleu_tokenizer("intl").has_value());
  BleuOptions none{BleuTokenizer::kNone, true};
  EXPECT_EQ(bleu_preprocess("Hello, World!  \r", none), "hello, world!");
}

TEST(Bleu, Utf8Validation) {
  size_t at = 99;
  EXPECT_TRUE(is_valid_utf8("„Grüße“ – 😀"));
  EXPECT_FALSE(is_valid_utf8("ab\xff", &at));
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong "/"
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_valid_utf8("a\xc3", &at));        // truncated
  EXPECT_EQ(at, 1u);
}

// ---- Hand-computed scores ----

TEST(Bleu, PerfectMatchIs100) {
  // 6 tokens: 6/6 unigrams, 5/5 bigrams, 4/4 trigrams, 3/3 4-grams; BP 1.
  const BleuStats s = sentence_bleu_stats("the cat sat on the mat", "the cat sat on the mat", {});
  EXPECT_EQ(s.matches[3], 3);
  EXPECT_EQ(s.totals[3], 3);
  EXPECT_EQ(format_sacrebleu(corpus_bleu(s)),
            "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");
}

TEST(Bleu, CountsAreClippedAndMissingOrdersSmoothedAsSacrebleu) {
  // hyp "the the the the", ref "the cat":
  //   unigrams: "the" x4 in hyp, x1 in ref -> clipped 1/4 = 25%
  //   bigrams "the the" x3: 0/3 -> exp smoothing, 1st zero order: 100 / (2 * 3) = 16.667
  //   trigrams x2: 0/2 -> 100 / (4 * 2) = 12.5;  4-gram x1: 0/1 -> 100 / (8 * 1) = 12.5
  //   hyp_len 4 >= ref_len 2: BP 1.  BLEU = (25 * 16.667 * 12.5 * 12.5)^(1/4) = 15.97
  const BleuStats s = sentence_bleu_stats("the the the the", "the cat", {});
  EXPECT_EQ(s.matches[0], 1);
  EXPECT_EQ(s.totals[0], 4);
  const BleuScore b = corpus_bleu(s);
  EXPECT_NEAR(b.precisions[1], 100.0 / 6, 1e-12);
  EXPECT_NEAR(b.score, std::pow(25 * (100.0 / 6) * 12.5 * 12.5, 0.25), 1e-9);
  EXPECT_EQ(format_sacrebleu(b), "BLEU = 15.97 25.0/16.7/12.5/12.5 (BP = 1.000 ratio = 2.000 hyp_len = 4 ref_len = 2)");
}

TEST(Bleu, BrevityPenalty) {
  // Every n-gram matches; hyp 4 tokens, ref 8: BP = exp(1 - 8/4) = e^-1 = 0.3679 -> BLEU 36.79.
  const BleuScore b = corpus_bleu(sentence_bleu_stats("a b c d", "a b c d e f g h", {}));
  EXPECT_DOUBLE_EQ(b.bp, std::exp(-1.0));
  EXPECT_EQ(format_sacrebleu(b), "BLEU = 36.79 100.0/100.0/100.0/100.0 (BP = 0.368 ratio = 0.500 hyp_len = 4 ref_len = 8)");
}

TEST(Bleu, ZeroMatchesScoreZeroWithZeroPrecisions) {
  // No n-gram of any order matches: sacreBLEU stops early, every precision printed as 0.
  const BleuScore b = corpus_bleu(sentence_bleu_stats("a b c d", "w x y z", {}));
  EXPECT_EQ(b.score, 0.0);
  EXPECT_EQ(format_sacrebleu(b), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
}

TEST(Bleu, NoFourGramsAtAllScoresZero) {
  // 3 tokens: no 4-gram exists (total 0), so that precision stays 0 and BLEU is 0 (log floored).
  EXPECT_EQ(score_line({"a b c"}, {"a b c"}),
            "BLEU = 0.00 100.0/100.0/100.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 ref_len = 3)");
}

TEST(Bleu, EmptyHypothesis) {
  // hyp_len 0 < ref_len 2: BP 0, ratio 0; nothing matches.
  EXPECT_EQ(score_line({""}, {"a b"}), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 2)");
  // No reference tokens either: ratio is 0 (sacreBLEU's convention), BP 1.
  EXPECT_EQ(score_line({""}, {""}), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}

TEST(Bleu, CorpusWithEmptyLineAndSmoothedOrders) {
  // "a b c d e" vs "a b x d e f": 1g 4/5, 2g (ab, de) 2/4, 3g 0/3, 4g 0/2
  // "hello there" vs "hello world there": 1g 2/2, 2g 0/1
  // "" vs "nothing here at all": 0 tokens, ref 4
  // Sums: 1g 6/7 = 85.7, 2g 2/5 = 40.0, 3g 0/3 -> 100/(2*3) = 16.7, 4g 0/2 -> 100/(4*2) = 12.5
  // hyp 7, ref 13: BP = exp(1 - 13/7) = 0.424.  (= sacrebleu 2.6.0, "smooth" set below)
  const std::vector<std::string> hyp = {"a b c d e", "hello there", ""};
  const std::vector<std::string> ref = {"a b x d e f", "hello world there", "nothing here at all"};
  const BleuScore b = corpus_bleu(hyp, ref, {});
  EXPECT_DOUBLE_EQ(b.bp, std::exp(1.0 - 13.0 / 7.0));
  EXPECT_EQ(format_sacrebleu(b), "BLEU = 12.34 85.7/40.0/16.7/12.5 (BP = 0.424 ratio = 0.538 hyp_len = 7 ref_len = 13)");
}

TEST(Bleu, StatsAddUpAndRoundTripThroughAVector) {
  const std::vector<std::string> hyp = {"The cat sat on the mat.", "It costs $1,000.50, not 900.", "", "a b c d e",
                                        "He said \"no\" twice -- and left."};
  const std::vector<std::string> ref = {"The cat is sitting on the mat.", "It costs $1,000.50 and not 900.", "x y",
                                        "a b x d e f", "He said \"no\" twice and then left."};
  BleuStats whole, first, second;
  for (size_t i = 0; i < hyp.size(); ++i) {
    const BleuStats s = sentence_bleu_stats(hyp[i], ref[i], {});
    whole += s;
    (i < 2 ? first : second) += s;
  }
  // As an allreduce would: the two halves' vectors summed element-wise, then back.
  std::vector<double> v = first.to_vector();
  const std::vector<double> w = second.to_vector();
  ASSERT_EQ(v.size(), static_cast<size_t>(BleuStats::kSize));
  for (size_t i = 0; i < v.size(); ++i) v[i] += w[i];
  EXPECT_EQ(BleuStats::from_vector(v), whole);
  BleuStats sum = first;
  sum += second;
  EXPECT_EQ(sum, whole);
  EXPECT_EQ(format_sacrebleu(corpus_bleu(sum)), format_sacrebleu(corpus_bleu(hyp, ref, {})));
  EXPECT_THROW(BleuStats::from_vector({1, 2}), std::invalid_argument);
  EXPECT_THROW(BleuStats::from_vector({0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0}), std::invalid_argument);
}

TEST(Bleu, WidthFollowsSacrebleuWidth) {
  const BleuScore b = corpus_bleu(sentence_bleu_stats("the the the the", "the cat", {}));
  EXPECT_EQ(format_sacrebleu(b, 1).substr(0, 12), "BLEU = 16.0 ");
}

// ---- sacreBLEU's own output ----
// Each expected line was produced by sacrebleu 2.6.0 (Python 3.11.7), with the sentences below
// written one per line to REF and HYP, by
//   sacrebleu REF -i HYP -f text -w 2 [-lc] [-tok none]
// (its signature "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" removed; the
// rest of the line is what Python's str(sacrebleu.corpus_bleu(hyps, [refs])) prints).

struct SacrebleuCase {
  const char* name;
  std::vector<std::string> hyp, ref;
  const char* tok13a;
  const char* lowercase;
  const char* none;
};

std::vector<SacrebleuCase> sacrebleu_cases() {
  return {
      {"en",
       {"The cat sat on the mat.", "It costs $1,000.50, not 900.", "He said \"no\" twice -- and left."},
       {"The cat is sitting on the mat.", "It costs $1,000.50 and not 900.", "He said \"no\" twice and then left."},
       "BLEU = 52.45 88.0/68.2/47.4/31.2 (BP = 0.961 ratio = 0.962 hyp_len = 25 ref_len = 26)",
       "BLEU = 52.45 88.0/68.2/47.4/31.2 (BP = 0.961 ratio = 0.962 hyp_len = 25 ref_len = 26)",
       "BLEU = 29.83 83.3/53.3/25.0/11.1 (BP = 0.895 ratio = 0.900 hyp_len = 18 ref_len = 20)"},
      {"de",
       {"Er sagte: „Guten Tag“ und ging nach Hause.", "Die Straße ist 3,5 km lang.", "Wir sehen uns im Mai – vielleicht.",
        "ÄRGER über Öl-Preise!"},
       {"Er sagte: „Guten Tag“ und ging heim.", "Die Straße ist 3,5 Kilometer lang.", "Wir sehen uns vielleicht im Mai.",
        "Ärger über Ölpreise!"},
       "BLEU = 46.36 79.3/52.0/38.1/29.4 (BP = 1.000 ratio = 1.074 hyp_len = 29 ref_len = 27)",
       "BLEU = 47.74 82.8/56.0/38.1/29.4 (BP = 1.000 ratio = 1.074 hyp_len = 29 ref_len = 27)",
       "BLEU = 46.96 66.7/50.0/43.8/33.3 (BP = 1.000 ratio = 1.091 hyp_len = 24 ref_len = 22)"},
      {"smooth",
       {"a b c d e", "hello there", ""},
       {"a b x d e f", "hello world there", "nothing here at all"},
       "BLEU = 12.34 85.7/40.0/16.7/12.5 (BP = 0.424 ratio = 0.538 hyp_len = 7 ref_len = 13)",
       "BLEU = 12.34 85.7/40.0/16.7/12.5 (BP = 0.424 ratio = 0.538 hyp_len = 7 ref_len = 13)",
       "BLEU = 12.34 85.7/40.0/16.7/12.5 (BP = 0.424 ratio = 0.538 hyp_len = 7 ref_len = 13)"},
      {"entities",
       {"&quot;Tom &amp; Jerry&quot; (1940) is a cartoon.", "Prices rose 5-10% in 2019-2020.", "See U.S.A. e.g. here..."},
       {"\"Tom & Jerry\" (1940) is an old cartoon.", "Prices rose 5-10 % in 2019 - 2020.", "See the U.S.A., e.g. here."},
       "BLEU = 77.21 92.1/82.9/75.0/69.0 (BP = 0.974 ratio = 0.974 hyp_len = 38 ref_len = 39)",
       "BLEU = 77.21 92.1/82.9/75.0/69.0 (BP = 0.974 ratio = 0.974 hyp_len = 38 ref_len = 39)",
       "BLEU = 7.92 50.0/15.4/5.0/3.6 (BP = 0.732 ratio = 0.762 hyp_len = 16 ref_len = 21)"},
  };
}

TEST(Bleu, MatchesSacrebleuOnSentenceSets) {
  for (const SacrebleuCase& c : sacrebleu_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(score_line(c.hyp, c.ref, {BleuTokenizer::k13a, false}), c.tok13a);
    EXPECT_EQ(score_line(c.hyp, c.ref, {BleuTokenizer::k13a, true}), c.lowercase);
    EXPECT_EQ(score_line(c.hyp, c.ref, {BleuTokenizer::kNone, false}), c.none);
  }
}

}  // namespace
}  // namespace mlpd
