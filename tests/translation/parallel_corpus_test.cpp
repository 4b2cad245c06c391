#include "translation/parallel_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include "../datasets/temp_dir.h"
#include "core/check.h"

namespace mlpd {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

const char* kDing =
    "# Version :: devel 2023-01-30\n"
    "# License :: GPL Version 2 or later; GNU General Public License\n"
    "Haus {n} | Das Haus ist groß. | Das Haus ist alt [ugs.]. :: house | The house is big. | The house is old.\n"
    "Zug {m} | Der Zug fährt ab. :: train | The train leaves. | The train departs.\n"
    "Hund {m} | Der Hund bellt laut!; Der Hund kläfft laut! :: dog | The dog barks loudly! [Am.]; The dog yaps!\n"
    "im Gegensatz zu etw. | Wir sind da. :: in contrast to sth. | We are there.\n"
    "Frage {f} | Wie geht es dir? :: question | How are you?\r\n"
    "Film {m} | Der Film geht gut aus. :: film | The film /movie ends well.\n"
    "ohne Trenner. Hier ist nichts.\n"
    "Ende {n} | Das ist das Ende von etw. | Das war’s … für heute. :: end | That is the end of sth. | That’s it … "
    "for today.\n"
    "Haus {n} (Wiederholung) | Das Haus ist groß. :: house | The house is large.\n"
    "Sonne {f} | Die  Sonne   scheint {vi} hell. :: sun | The sun {n} shines <brightly> brightly.\n";

TEST(ParallelCorpus, ding_parser_keeps_aligned_sentences_by_the_rule) {
  DingStats st;
  const std::vector<SentencePair> got = ding_sentence_pairs(kDing, &st);
  const std::vector<SentencePair> want = {
      {"Das Haus ist groß.", "The house is big."},     // annotations dropped, one-word "Haus" not a sentence
      {"Das Haus ist alt.", "The house is old."},      // "alt [ugs.]." -> "alt."
      {"Der Hund bellt laut!", "The dog barks loudly!"},  // first "; " variant
      {"Wir sind da.", "We are there."},               // its phrase neighbour is dropped (lower case, etw.)
      {"Wie geht es dir?", "How are you?"},            // CRLF line end
      {"Die Sonne scheint hell.", "The sun shines brightly."},  // whitespace collapsed, {..} <..> removed
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(st.lines, 9);             // the two comments and the line without " :: " do not count
  EXPECT_EQ(st.mismatched_lines, 1);  // Zug: 2 German alternatives, 3 English
  EXPECT_EQ(st.duplicates, 1);        // "Das Haus ist groß." again: the first pair is kept
}

TEST(ParallelCorpus, ding_alternative_cleaning) {
  EXPECT_EQ(ding_clean_alternative("Aal {m} (auf der Speisekarte) [cook.]"), "Aal (auf der Speisekarte)");
  EXPECT_EQ(ding_clean_alternative("eine Mahlzeit <> auf den Tisch zaubern {vt} [cook.]; zweite"),
            "eine Mahlzeit auf den Tisch zaubern");
  EXPECT_EQ(ding_clean_alternative("  Das  war   gut [ugs.] !  "), "Das war gut!");
  EXPECT_EQ(ding_clean_alternative("offen [ohne Ende"), "offen [ohne Ende");
}

TEST(ParallelCorpus, read_ding_file_and_missing_file) {
  TempDir d;
  write_file(d / "de-en", kDing);
  EXPECT_EQ(read_ding_sentence_pairs(d / "de-en").size(), 6u);
  try {
    read_ding_sentence_pairs(d / "absent");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find(d / "absent"), std::string::npos) << e.what();
  }
}

TEST(ParallelCorpus, fnv1a64_matches_the_published_vectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

std::vector<SentencePair> numbered_pairs(int n) {
  std::vector<SentencePair> p;
  for (int i = 0; i < n; ++i) p.push_back({"Satz " + std::to_string(i) + ".", "Sentence " + std::to_string(i) + "."});
  return p;
}

TEST(ParallelCorpus, split_rule_depends_on_the_sentences_not_their_order) {
  const std::vector<SentencePair> pairs = numbered_pairs(40000);
  const TrainTestSplit a = split_train_test(pairs);
  EXPECT_EQ(a.modulus, 16u);
  EXPECT_GE(a.test.size(), static_cast<size_t>(kMinTestPairs));
  EXPECT_EQ(a.train.size() + a.test.size(), pairs.size());
  for (const SentencePair& p : a.test) EXPECT_EQ(fnv1a64(p.src) % 16, 0u);
  for (const SentencePair& p : a.train) EXPECT_NE(fnv1a64(p.src) % 16, 0u);
  std::vector<SentencePair> shuffled = pairs;
  std::mt19937 rng(3);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const TrainTestSplit b = split_train_test(shuffled);
  auto srcs = [](const std::vector<SentencePair>& v) {
    std::set<std::string> s;
    for (const auto& p : v) s.insert(p.src);
    return s;
  };
  EXPECT_EQ(srcs(a.test), srcs(b.test));
  EXPECT_EQ(srcs(a.train), srcs(b.train));
  // Within a split the input order is kept.
  EXPECT_TRUE(std::is_sorted(a.test.begin(), a.test.end(), [](const SentencePair& x, const SentencePair& y) {
    return std::stoi(x.src.substr(5)) < std::stoi(y.src.substr(5));
  }));
}

TEST(ParallelCorpus, split_halves_the_modulus_until_the_test_set_is_large_enough) {
  const std::vector<SentencePair> pairs = numbered_pairs(6000);  // ~375 at 16, ~750 at 8, ~1500 at 4
  const TrainTestSplit s = split_train_test(pairs);
  EXPECT_EQ(s.modulus, 4u);
  EXPECT_GE(s.test.size(), 1000u);
  // Halving only adds pairs: the test set at modulus 16 lies inside the one at modulus 4.
  for (const SentencePair& p : split_train_test(pairs, 1).test) EXPECT_EQ(fnv1a64(p.src) % 4, 0u);
  EXPECT_THROW(split_train_test(numbered_pairs(100)), UserError);
}

TEST(ParallelCorpus, parallel_files_with_unequal_line_counts_are_a_user_error) {
  TempDir d;
  write_file(d / "a.de", "eins\nzwei\ndrei\n");
  write_file(d / "a.en", "one\ntwo\n");
  try {
    read_parallel_files(d / "a.de", d / "a.en");
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(m.find(d / "a.de"), std::string::npos) << m;
    EXPECT_NE(m.find(d / "a.en"), std::string::npos) << m;
    EXPECT_NE(m.find("3 lines"), std::string::npos) << m;
    EXPECT_NE(m.find("2 lines"), std::string::npos) << m;
  }
  EXPECT_THROW(read_parallel_files(d / "a.de", d / "missing.en"), UserError);
}

TEST(ParallelCorpus, parallel_files_drop_pairs_with_an_empty_side) {
  TempDir d;
  write_file(d / "b.de", "Guten Morgen.\r\n\n  \nBis bald!\nNur links.\n");
  write_file(d / "b.en", "Good morning.\r\nEmpty left.\n\n  See you soon! \n\n");
  const std::vector<SentencePair> got = read_parallel_files(d / "b.de", d / "b.en");
  const std::vector<SentencePair> want = {{"Guten Morgen.", "Good morning."}, {"Bis bald!", "See you soon!"}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace mlpd
