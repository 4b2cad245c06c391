#include "translation/prepare_translation.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "core/check.h"
#include "translation/bpe.h"
#include "translation/parallel_corpus.h"
#include "translation/translation_data.h"

namespace mlpd {

namespace {

constexpr const char* kDingSelection =
    "Ding trans-de-en: aligned ' | ' alternatives of '::' entries (lines with unequal counts skipped); first '; ' "
    "variant; {..} [..] <..> removed, whitespace collapsed; both sides end in . ? or !, >= 3 words, no lower-case "
    "start, no placeholder abbreviation at the end, no ellipsis, no '/' on the English side; deduplicated by German "
    "sentence (first kept)";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "train.en" -> "en"; "" when the extension does not look like a language code.
std::string lang_of(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext.size() < 3 || ext.size() > 4) return "";
  ext.erase(0, 1);
  for (char c : ext)
    if (c < 'a' || c > 'z') return "";
  return ext;
}

std::string split_text(const TrainTestSplit& s) {
  return "test when FNV-1a-64(source sentence bytes) % " + std::to_string(s.modulus) + " == 0 (modulus 16, halved " +
         "while the test split would hold fewer than " + std::to_string(kMinTestPairs) + " pairs)";
}

double mean_tokens(const TokenizedSplit& a, const TokenizedSplit& b, bool src) {
  const double tokens = static_cast<double>(src ? a.src_tokens.size() + b.src_tokens.size()
                                                : a.tgt_tokens.size() + b.tgt_tokens.size());
  const double n = static_cast<double>(a.size() + b.size());
  return n > 0 ? tokens / n : 0.0;
}

}  // namespace

void prepare_translation(const PrepareRequest& r, const std::string& benchmark) {
  const std::string who = "prepare " + benchmark + " " + r.scale;
  const auto t0 = std::chrono::steady_clock::now();
  const bool parallel = !r.from_parallel_src.empty() || !r.from_parallel_tgt.empty();
  const bool test_parallel = !r.test_parallel_src.empty() || !r.test_parallel_tgt.empty();
  if (r.vocab_size < 0) throw UserError(who + ": --vocab-size must be positive", 2);

  TranslationData d;
  d.benchmark = benchmark;
  d.scale = r.scale;
  d.created_by = "mlperf-dist prepare --benchmark " + benchmark + " --scale " + r.scale;
  std::vector<SentencePair> train, test;
  TrainTestSplit split;
  int vocab = r.vocab_size;
  if (r.scale == "mini") {
    if (parallel || test_parallel)
      throw UserError(who + ": --from-parallel and --test-parallel are for --scale reference; mini reads the "
                            "trans-de-en dictionary (--from for another copy of it)",
                      2);
    const std::string path = r.from.empty() ? kTransDeEnPath : r.from;
    if (!std::filesystem::exists(path))
      throw UserError(who + ": " + path +
                          (r.from.empty() ? " is missing: install the Debian package trans-de-en (launch/install-deps "
                                            "does)"
                                          : " does not exist (--from: a copy of Debian's trans-de-en dictionary)"),
                      2);
    spdlog::info("prepare: German-English sentence pairs from the Ding dictionary {}", path);
    DingStats st;
    const std::vector<SentencePair> pairs = read_ding_sentence_pairs(path, &st);
    spdlog::info("prepare: {} entries ({} skipped: alternative counts differ), {} aligned alternatives -> {} "
                 "sentence pairs ({} repeated German sentences dropped)",
                 st.lines, st.mismatched_lines, st.alternatives, pairs.size(), st.duplicates);
    split = split_train_test(pairs);
    train = std::move(split.train);
    test = std::move(split.test);
    d.src_lang = "de";
    d.tgt_lang = "en";
    d.source = "Ding German-English dictionary (Debian package trans-de-en, " + path + "): its example sentences";
    d.licence = "GPL-2+ (Ding, (c) Frank Richter, TU Chemnitz; https://dict.tu-chemnitz.de/)";
    d.selection = kDingSelection;
    d.split_rule = split_text(split);
    if (vocab == 0) vocab = kMiniVocabSize;
  } else {
    if (r.from_parallel_src.empty() || r.from_parallel_tgt.empty())
      throw UserError(who + ": give the training corpus with --from-parallel SRC TGT (plain text, one sentence a "
                            "line, e.g. WMT16 En-De train.en train.de) and optionally --test-parallel SRC TGT "
                            "(e.g. newstest2014.en newstest2014.de)",
                      2);
    if (test_parallel && (r.test_parallel_src.empty() || r.test_parallel_tgt.empty()))
      throw UserError(who + ": --test-parallel needs two files, SRC and TGT", 2);
    spdlog::info("prepare: parallel corpus {} / {}", r.from_parallel_src, r.from_parallel_tgt);
    std::vector<SentencePair> pairs = read_parallel_files(r.from_parallel_src, r.from_parallel_tgt);
    d.selection = "every line pair of " + r.from_parallel_src + " and " + r.from_parallel_tgt +
                  " with both sides non-empty";
    if (test_parallel) {
      train = std::move(pairs);
      test = read_parallel_files(r.test_parallel_src, r.test_parallel_tgt);
      if (test.empty())
        throw UserError(who + ": the test files " + r.test_parallel_src + " and " + r.test_parallel_tgt +
                            " hold no sentence pair",
                        2);
      d.split_rule = "train: the --from-parallel files; test: " + r.test_parallel_src + " and " + r.test_parallel_tgt;
    } else {
      split = split_train_test(pairs);
      train = std::move(split.train);
      test = std::move(split.test);
      d.split_rule = split_text(split);
      if (test.size() > 10000)
        spdlog::warn("prepare: the split rule puts {} pairs in test: give the held-out files with --test-parallel "
                     "(newstest2014) for a test set of the usual size",
                     test.size());
    }
    if (train.empty()) throw UserError(who + ": no training sentence pair in " + r.from_parallel_src, 2);
    d.src_lang = lang_of(r.from_parallel_src);
    d.tgt_lang = lang_of(r.from_parallel_tgt);
    if (d.src_lang.empty()) d.src_lang = "src";
    if (d.tgt_lang.empty()) d.tgt_lang = "tgt";
    d.source = "parallel text " + r.from_parallel_src + " / " + r.from_parallel_tgt +
               (test_parallel ? "; test " + r.test_parallel_src + " / " + r.test_parallel_tgt : "");
    d.licence = "as given by the corpus provider (WMT: see https://www.statmt.org/wmt16/translation-task.html)";
    if (vocab == 0) vocab = kReferenceVocabSize;
  }
  const double read_s = seconds_since(t0);
  spdlog::info("prepare: {} pairs: {} train, {} test ({}) in {:.2f} s", train.size() + test.size(), train.size(),
               test.size(), d.split_rule, read_s);

  const auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> texts;
  texts.reserve(2 * train.size());
  for (const SentencePair& p : train) texts.push_back(p.src);
  for (const SentencePair& p : train) texts.push_back(p.tgt);
  d.bpe = learn_bpe(texts, vocab);
  texts.clear();
  const double learn_s = seconds_since(t1);
  spdlog::info("prepare: joint BPE of {} symbols ({} characters, {} merges; asked {}) learned on the {} training "
               "sentences in {:.2f} s",
               d.bpe.vocab_size(), d.bpe.first_merge_id() - Bpe::kNumSpecials, d.bpe.merges.size(), vocab,
               2 * train.size(), learn_s);

  const auto t2 = std::chrono::steady_clock::now();
  d.train = tokenize_pairs(d.bpe, train, false);
  d.test = tokenize_pairs(d.bpe, test, true);
  const double encode_s = seconds_since(t2);
  int64_t unk = 0;
  for (const TokenizedSplit* s : {&d.train, &d.test})
    for (const std::vector<int32_t>* v : {&s->src_tokens, &s->tgt_tokens})
      for (int32_t t : *v) unk += t == Bpe::kUnk;
  spdlog::info("prepare: encoded in {:.2f} s: mean tokens per sentence {:.2f} ({}) and {:.2f} ({}); {} train + {} "
               "test tokens; {} unknown",
               encode_s, mean_tokens(d.train, d.test, true), d.src_lang, mean_tokens(d.train, d.test, false),
               d.tgt_lang, d.train.src_tokens.size() + d.train.tgt_tokens.size(),
               d.test.src_tokens.size() + d.test.tgt_tokens.size(), unk);

  write_translation_data(r.output, d);
  spdlog::info("prepare: {} {}: {} -> {}, vocabulary {}, {} train / {} test pairs, total {:.2f} s", benchmark, r.scale,
               d.src_lang, d.tgt_lang, d.bpe.vocab_size(), d.train.size(), d.test.size(), seconds_since(t0));
}

}  // namespace mlpd
