#include "translation/translation_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../datasets/temp_dir.h"
#include "core/check.h"
#include "datasets/h5.h"
#include "translation/prepare_translation.h"

namespace mlpd {
namespace {

std::vector<SentencePair> small_pairs(int n, int offset) {
  std::vector<SentencePair> p;
  for (int i = offset; i < offset + n; ++i)
    p.push_back({"Das Haus Nummer " + std::to_string(i) + " ist „groß“.",
                 "The house number " + std::to_string(i) + " is ’big’."});
  return p;
}

TranslationData small_data() {
  TranslationData d;
  d.benchmark = "gnmt";
  d.scale = "mini";
  d.source = "test";
  d.licence = "none";
  d.created_by = "translation_data_test";
  d.src_lang = "de";
  d.tgt_lang = "en";
  d.selection = "numbered sentences";
  d.split_rule = "first 40 train, next 10 test";
  const auto train = small_pairs(40, 0), test = small_pairs(10, 1000);
  std::vector<std::string> texts;
  for (const auto& p : train) {
    texts.push_back(p.src);
    texts.push_back(p.tgt);
  }
  d.bpe = learn_bpe(texts, 80);
  d.train = tokenize_pairs(d.bpe, train, false);
  d.test = tokenize_pairs(d.bpe, test, true);
  return d;
}

std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no UserError";
  return "";
}

// Replaces int dataset `name` of a written file by `values` (file type `type`).
template <class T>
void rewrite(const std::string& path, const std::string& name, hid_t type, hid_t mem, const std::vector<T>& values) {
  H5Id file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
  H5_CHECK(H5Ldelete(file, name.c_str(), H5P_DEFAULT));
  const hsize_t dims[1] = {values.size()};
  H5Id space(H5_CHECK(H5Screate_simple(1, dims, nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (!values.empty()) H5_CHECK(H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  ds.close();
  file.close();
}

TEST(TranslationData, write_then_load_round_trips) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = (dir.path / "sub" / "gnmt_mini.h5").string();
  write_translation_data(path, d);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  EXPECT_NO_THROW(check_translation_data(path));
  const TranslationData e = load_translation_data(path);
  EXPECT_EQ(e.benchmark, "gnmt");
  EXPECT_EQ(e.scale, "mini");
  EXPECT_EQ(e.src_lang, "de");
  EXPECT_EQ(e.tgt_lang, "en");
  EXPECT_EQ(e.licence, "none");
  EXPECT_EQ(e.split_rule, d.split_rule);
  EXPECT_EQ(e.bpe.symbols, d.bpe.symbols);
  EXPECT_EQ(e.bpe.merges, d.bpe.merges);
  for (auto [a, b] : {std::pair{&d.train, &e.train}, std::pair{&d.test, &e.test}}) {
    EXPECT_EQ(a->src_tokens, b->src_tokens);
    EXPECT_EQ(a->src_offsets, b->src_offsets);
    EXPECT_EQ(a->tgt_tokens, b->tgt_tokens);
    EXPECT_EQ(a->tgt_offsets, b->tgt_offsets);
    EXPECT_EQ(a->src_text, b->src_text);
    EXPECT_EQ(a->tgt_text, b->tgt_text);
  }
  ASSERT_EQ(e.test.size(), 10);
  EXPECT_EQ(e.train.size(), 40);
  EXPECT_TRUE(e.train.src_text.empty());
  // The loaded vocabulary decodes the stored tokens back to the references.
  for (int64_t i = 0; i < e.test.size(); ++i) {
    EXPECT_EQ(decode(e.bpe, e.test.tgt(i)), e.test.tgt_text[static_cast<size_t>(i)]);
    EXPECT_EQ(decode(e.bpe, e.test.src(i)), e.test.src_text[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(encode(e.bpe, "Das Haus Nummer 7 ist „groß“."),
            std::vector<int32_t>(e.train.src(7).begin(), e.train.src(7).end()));
}

TEST(TranslationData, missing_or_non_hdf5_file_is_a_user_error_naming_it) {
  TempDir dir;
  const std::string missing = dir / "none.h5";
  EXPECT_NE(user_error_of([&] { check_translation_data(missing); }).find(missing), std::string::npos);
  const std::string junk = dir / "junk.h5";
  std::ofstream(junk) << "not hdf5";
  EXPECT_NE(user_error_of([&] { load_translation_data(junk); }).find(junk), std::string::npos);
}

TEST(TranslationData, check_catches_a_truncated_offsets_array) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = dir / "t.h5";
  write_translation_data(path, d);
  std::vector<int64_t> off = d.train.src_offsets;
  off.pop_back();
  rewrite(path, "/train/src_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, off);
  const std::string m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("/train/src_offsets"), std::string::npos) << m;
  EXPECT_NE(m.find("prepare --benchmark gnmt"), std::string::npos) << m;
}

TEST(TranslationData, check_catches_offsets_that_do_not_end_at_the_array_or_decrease) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = dir / "t.h5";
  write_translation_data(path, d);
  std::vector<int64_t> off = d.test.tgt_offsets;
  off.back() -= 1;
  rewrite(path, "/test/tgt_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, off);
  std::string m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find("/test/tgt_offsets ends at"), std::string::npos) << m;

  write_translation_data(path, d);
  off = d.train.tgt_offsets;
  std::swap(off[3], off[4]);
  rewrite(path, "/train/tgt_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, off);
  m = user_error_of([&] { load_translation_data(path); });
  EXPECT_NE(m.find("/train/tgt_offsets decreases"), std::string::npos) << m;
}

TEST(TranslationData, check_catches_an_out_of_range_token_id) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = dir / "t.h5";
  write_translation_data(path, d);
  std::vector<int32_t> tokens = d.test.tgt_tokens;
  tokens[5] = d.bpe.vocab_size();
  rewrite(path, "/test/tgt_tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, tokens);
  const std::string m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("/test/tgt_tokens holds token id " + std::to_string(d.bpe.vocab_size()) + " at index 5"),
            std::string::npos)
      << m;
}

TEST(TranslationData, check_catches_a_wrong_dtype_and_a_missing_dataset) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = dir / "t.h5";
  write_translation_data(path, d);
  std::vector<int64_t> wide(d.train.src_tokens.begin(), d.train.src_tokens.end());
  rewrite(path, "/train/src_tokens", H5T_STD_I64LE, H5T_NATIVE_INT64, wide);
  std::string m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find("/train/src_tokens is int64, expected int32"), std::string::npos) << m;

  write_translation_data(path, d);
  {
    H5Id file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    H5_CHECK(H5Ldelete(file, "/test/tgt_text", H5P_DEFAULT));
    file.close();
  }
  m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find("/test/tgt_text is missing"), std::string::npos) << m;
}

TEST(TranslationData, check_catches_an_inconsistent_vocabulary) {
  TempDir dir;
  const TranslationData d = small_data();
  const std::string path = dir / "t.h5";
  write_translation_data(path, d);
  std::vector<int32_t> merges;
  for (auto [a, b] : d.bpe.merges) {
    merges.push_back(b);  // swapped: the texts no longer concatenate
    merges.push_back(a);
  }
  {
    H5Id file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    H5_CHECK(H5Ldelete(file, "/vocab/merges", H5P_DEFAULT));
    const hsize_t dims[2] = {d.bpe.merges.size(), 2};
    H5Id space(H5_CHECK(H5Screate_simple(2, dims, nullptr)));
    H5Id ds(H5_CHECK(H5Dcreate2(file, "/vocab/merges", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, merges.data()));
    ds.close();
    file.close();
  }
  const std::string m = user_error_of([&] { check_translation_data(path); });
  EXPECT_NE(m.find("/vocab: BPE vocabulary"), std::string::npos) << m;
}

// prepare_translation end to end on small inputs it reads through the request.
void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(TranslationData, prepare_mini_from_a_small_dictionary_copy) {
  TempDir dir;
  std::string dict = "# a small copy of the Ding format\n";
  for (int i = 0; i < 2400; ++i)
    dict += "Satz {m} | Das ist Satz " + std::to_string(i) + ". :: sentence | This is sentence " + std::to_string(i) +
            ".\n";
  write_file(dir / "de-en", dict);
  PrepareRequest r;
  r.scale = "mini";
  r.from = dir / "de-en";
  r.output = (dir.path / "out" / "transformer_mini.h5").string();
  r.vocab_size = 60;
  prepare_translation(r, "transformer");
  check_translation_data(r.output);
  const TranslationData d = load_translation_data(r.output);
  EXPECT_EQ(d.benchmark, "transformer");
  EXPECT_EQ(d.src_lang, "de");
  EXPECT_EQ(d.tgt_lang, "en");
  EXPECT_EQ(d.bpe.vocab_size(), 60);
  EXPECT_EQ(d.train.size() + d.test.size(), 2400);
  EXPECT_GE(d.test.size(), kMinTestPairs);
  for (int64_t i = 0; i < d.test.size(); ++i)
    EXPECT_EQ(fnv1a64(d.test.src_text[static_cast<size_t>(i)]) % 2, 0u);

  PrepareRequest missing = r;
  missing.from = dir / "nothing";
  EXPECT_NE(user_error_of([&] { prepare_translation(missing, "gnmt"); }).find(dir / "nothing"), std::string::npos);
  PrepareRequest parallel = r;
  parallel.from_parallel_src = dir / "x.de";
  parallel.from_parallel_tgt = dir / "x.en";
  EXPECT_NE(user_error_of([&] { prepare_translation(parallel, "gnmt"); }).find("--scale reference"),
            std::string::npos);
}

TEST(TranslationData, prepare_reference_from_parallel_files_with_a_test_pair) {
  TempDir dir;
  std::string en, de, ten, tde;
  for (int i = 0; i < 300; ++i) {
    en += "This is sentence " + std::to_string(i) + ".\n";
    de += "Das ist Satz " + std::to_string(i) + ".\n";
  }
  for (int i = 0; i < 20; ++i) {
    ten += "This is test " + std::to_string(i) + ".\n";
    tde += "Das ist Test " + std::to_string(i) + ".\n";
  }
  write_file(dir / "train.en", en);
  write_file(dir / "train.de", de);
  write_file(dir / "newstest.en", ten);
  write_file(dir / "newstest.de", tde);
  PrepareRequest r;
  r.scale = "reference";
  r.from_parallel_src = dir / "train.en";
  r.from_parallel_tgt = dir / "train.de";
  r.test_parallel_src = dir / "newstest.en";
  r.test_parallel_tgt = dir / "newstest.de";
  r.output = dir / "gnmt_reference.h5";
  r.vocab_size = 50;
  prepare_translation(r, "gnmt");
  const TranslationData d = load_translation_data(r.output);
  EXPECT_EQ(d.src_lang, "en");
  EXPECT_EQ(d.tgt_lang, "de");
  EXPECT_EQ(d.train.size(), 300);
  ASSERT_EQ(d.test.size(), 20);
  EXPECT_EQ(d.test.tgt_text[3], "Das ist Test 3.");
  EXPECT_EQ(d.bpe.vocab_size(), 50);

  PrepareRequest none = r;
  none.from_parallel_src.clear();
  none.from_parallel_tgt.clear();
  EXPECT_NE(user_error_of([&] { prepare_translation(none, "gnmt"); }).find("--from-parallel"), std::string::npos);
}

}  // namespace
}  // namespace mlpd
