#include "translation/bpe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/check.h"

namespace mlpd {
namespace {

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = {
      "Der Zug nach Chicago fährt von Gleis 4 ab.",
      "The train for Chicago is leaving from platform 4.",
      "Grüß Gott, Herr Müller! Wie geht’s?",
      "„Das schaffe ich nie.“, sagte er niedergeschlagen.",
      "'I’ll never manage it,' he said hopelessly.",
      "Über ihren Zustand ist noch nichts bekannt (leider).",
      "Ärger, Öl und Übel: ß ist selten; «Guillemets» – auch…",
      "Is it 50% off? Yes: 2 + 2 = 4 & [x] {y} <z> / \\ | ~ ^ _ ` @ # $ *",
      "Das Haus ist groß. Das Haus ist alt. Das Haus ist schön.",
      "The house is big. The house is old. The house is beautiful.",
  };
  return texts;
}

std::string round_trip(const Bpe& bpe, const std::string& text) { return decode(bpe, encode(bpe, text)); }

TEST(Bpe, round_trip_restores_text_with_umlauts_quotes_punctuation_and_spaces) {
  for (int vocab : {100, 120, 400, 2000}) {
    const Bpe bpe = learn_bpe(corpus(), vocab);
    for (const std::string& t : corpus()) {
      const std::vector<int32_t> ids = encode(bpe, t);
      ASSERT_EQ(std::count(ids.begin(), ids.end(), Bpe::kUnk), 0) << "vocab " << vocab;
    }
    for (const std::string& t : corpus()) EXPECT_EQ(round_trip(bpe, t), t) << "vocab " << vocab;
    EXPECT_EQ(round_trip(bpe, "  Das   Haus\tist\n groß!  "), "Das Haus ist groß!");
    EXPECT_EQ(round_trip(bpe, "„Müller“, sagte er: ’s ist (groß)…"), "„Müller“, sagte er: ’s ist (groß)…");
    EXPECT_EQ(round_trip(bpe, "Haus.Haus..Haus ,Haus"), "Haus.Haus..Haus ,Haus");
    EXPECT_EQ(round_trip(bpe, ""), "");
    EXPECT_EQ(round_trip(bpe, "   "), "");
  }
}

TEST(Bpe, unseen_characters_and_the_marker_encode_to_unk) {
  const Bpe bpe = learn_bpe(corpus(), 200);
  const std::vector<int32_t> t = encode(bpe, "Das ☃ Haus");
  EXPECT_EQ(std::count(t.begin(), t.end(), Bpe::kUnk), 1);
  EXPECT_EQ(decode(bpe, t), "Das <unk> Haus");
  const std::vector<int32_t> m = encode(bpe, std::string("Haus") + std::string(kBpeMarker));
  EXPECT_EQ(m.back(), Bpe::kUnk);
  const std::vector<int32_t> inside = encode(bpe, "Hä☃☃us");
  EXPECT_EQ(std::count(inside.begin(), inside.end(), Bpe::kUnk), 2);
  EXPECT_EQ(decode(bpe, inside), "Hä<unk><unk>us");
}

TEST(Bpe, decode_stops_at_eos_and_skips_pad_and_bos) {
  const Bpe bpe = learn_bpe(corpus(), 200);
  const std::vector<int32_t> a = encode(bpe, "Das Haus");
  const std::vector<int32_t> b = encode(bpe, "ist alt");
  std::vector<int32_t> framed{Bpe::kBos};
  framed.insert(framed.end(), a.begin(), a.end());
  framed.push_back(Bpe::kPad);
  framed.push_back(Bpe::kEos);
  framed.insert(framed.end(), b.begin(), b.end());
  EXPECT_EQ(decode(bpe, framed), "Das Haus");
  const std::vector<int32_t> bad{bpe.vocab_size()};
  EXPECT_THROW(decode(bpe, bad), std::out_of_range);
}

TEST(Bpe, learning_is_deterministic_and_independent_of_input_order) {
  const Bpe a = learn_bpe(corpus(), 300);
  const Bpe b = learn_bpe(corpus(), 300);
  EXPECT_EQ(a.symbols, b.symbols);
  EXPECT_EQ(a.merges, b.merges);
  std::vector<std::string> shuffled = corpus();
  std::mt19937 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  ASSERT_NE(shuffled, corpus());
  const Bpe c = learn_bpe(shuffled, 300);
  EXPECT_EQ(a.symbols, c.symbols);
  EXPECT_EQ(a.merges, c.merges);
  // Control: another corpus gives other merges.
  std::vector<std::string> other = corpus();
  other.push_back("zzz zzz zzz zzz zzz zzz zzz zzz zzz zzz zzz");
  EXPECT_NE(learn_bpe(other, 300).merges, a.merges);
}

TEST(Bpe, vocabulary_size_is_respected) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("Satz Nummer " + std::to_string(i * 7919) + " ist hier, und " +
                                                std::to_string(i * 104729) + " ist dort.");
  for (int v : {5, 6, 20, 37, 100, 150}) {
    const Bpe bpe = learn_bpe(texts, v);
    EXPECT_EQ(bpe.vocab_size(), v);
    const std::vector<int32_t> t = encode(bpe, texts[3]);
    for (int32_t id : t) EXPECT_TRUE(id >= Bpe::kUnk && id < v) << id;
    // With room for every character, nothing is unknown.
    if (v >= 100) {
      EXPECT_EQ(std::count(t.begin(), t.end(), Bpe::kUnk), 0);
    }
  }
  // Room for fewer characters than there are: the marker and the most frequent stay.
  const Bpe tiny = learn_bpe({"aaa b"}, 6);
  EXPECT_EQ(tiny.symbols, (std::vector<std::string>{"<pad>", "<s>", "</s>", "<unk>", "a", "\xE2\x96\x81"}));
  EXPECT_EQ(encode(tiny, "b a"), (std::vector<int32_t>{5, Bpe::kUnk, 5, 4}));
}

TEST(Bpe, too_small_a_vocabulary_is_a_user_error) {
  EXPECT_THROW(learn_bpe(corpus(), 4), UserError);
}

TEST(Bpe, known_merges_on_a_hand_made_corpus) {
  // Pre-tokens: "▁ab" three times, "▁abc" once. Base symbols in byte order: a=4 b=5 c=6 ▁=7.
  // Pair counts: (▁,a)=4, (a,b)=4, (b,c)=1: the tie goes to the smaller ids, (a,b) -> 8 "ab";
  // then (▁,ab)=4 -> 9 "▁ab"; then (▁ab,c)=1 occurs once only: learning stops at 10 symbols.
  const Bpe bpe = learn_bpe({"ab ab", "ab abc"}, 50);
  const std::vector<std::string> want = {"<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "\xE2\x96\x81", "ab",
                                         "\xE2\x96\x81" "ab"};
  EXPECT_EQ(bpe.symbols, want);
  const std::vector<std::pair<int32_t, int32_t>> merges = {{4, 5}, {7, 8}};
  EXPECT_EQ(bpe.merges, merges);
  EXPECT_EQ(encode(bpe, "abc ab"), (std::vector<int32_t>{9, 6, 9}));
  EXPECT_EQ(encode(bpe, "ba"), (std::vector<int32_t>{7, 5, 4}));
  // A cap of 9 symbols stops after the first merge.
  EXPECT_EQ(learn_bpe({"ab ab", "ab abc"}, 9).merges, (std::vector<std::pair<int32_t, int32_t>>{{4, 5}}));
}

TEST(Bpe, punctuation_is_its_own_pre_token) {
  const Bpe bpe = learn_bpe({"Haus. Haus. Haus. Haus, Haus!"}, 100);
  for (const std::string& s : bpe.symbols) {
    if (s.size() < 2 || s[0] == '<') continue;
    EXPECT_EQ(s.find_first_of(".,!"), std::string::npos) << s;
  }
  EXPECT_NE(std::find(bpe.symbols.begin(), bpe.symbols.end(), "\xE2\x96\x81Haus"), bpe.symbols.end());
}

TEST(Bpe, encoding_a_training_word_is_cached_and_stable) {
  const Bpe bpe = learn_bpe(corpus(), 300);
  const std::vector<int32_t> first = encode(bpe, corpus()[8]);
  const Bpe copy = bpe;
  EXPECT_EQ(encode(copy, corpus()[8]), first);
  EXPECT_EQ(encode(bpe, corpus()[8]), first);
  // The same vocabulary rebuilt from its parts (as the loader does) encodes the same way.
  const Bpe rebuilt = make_bpe(bpe.symbols, bpe.merges);
  EXPECT_EQ(encode(rebuilt, corpus()[8]), first);
}

TEST(Bpe, make_bpe_rejects_inconsistent_parts) {
  const Bpe bpe = learn_bpe({"ab ab", "ab abc"}, 50);
  auto bad_symbols = bpe.symbols;
  bad_symbols[9] = "xx";
  EXPECT_THROW(make_bpe(bad_symbols, bpe.merges), std::invalid_argument);
  auto bad_merges = bpe.merges;
  bad_merges[1] = {9, 4};
  EXPECT_THROW(make_bpe(bpe.symbols, bad_merges), std::invalid_argument);
  auto no_marker = std::vector<std::string>(bpe.symbols.begin(), bpe.symbols.begin() + 7);
  EXPECT_THROW(make_bpe(no_marker, {}), std::invalid_argument);
  auto unordered = std::vector<std::string>{"<pad>", "<s>", "</s>", "<unk>", "b", "a", "\xE2\x96\x81"};
  EXPECT_THROW(make_bpe(unordered, {}), std::invalid_argument);
  EXPECT_NO_THROW(make_bpe(bpe.symbols, bpe.merges));
}

TEST(Bpe, normalize_whitespace_collapses_and_trims) {
  EXPECT_EQ(normalize_whitespace("  a \t b\n\nc  "), "a b c");
  EXPECT_EQ(normalize_whitespace(""), "");
}

}  // namespace
}  // namespace mlpd
