#include "translation/parallel_corpus.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <unordered_set>

#include "core/check.h"
#include "core/read_file.h"

namespace mlpd {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_at(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t p = s.find(sep);
    if (p == std::string_view::npos) {
      out.push_back(s);
      return out;
    }
    out.push_back(s.substr(0, p));
    s.remove_prefix(p + sep.size());
  }
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t e = text.find('\n');
    std::string_view line = text.substr(0, e);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (e == std::string_view::npos) break;
    text.remove_prefix(e + 1);
  }
  return lines;
}

std::vector<std::string_view> words_of(std::string_view s) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t b = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > b) w.push_back(s.substr(b, i - b));
  }
  return w;
}

bool starts_lower(std::string_view s) {
  if (s.empty()) return false;
  if (s[0] >= 'a' && s[0] <= 'z') return true;
  // ä ö ü ß (a German phrase can start with them as well)
  for (std::string_view l : {"\xC3\xA4", "\xC3\xB6", "\xC3\xBC", "\xC3\x9F"})
    if (s.starts_with(l)) return true;
  return false;
}

// Step 3 of the rule (parallel_corpus.h) for one side.
bool looks_like_sentence(std::string_view s, bool english) {
  if (s.empty()) return false;
  const char last = s.back();
  if (last != '.' && last != '?' && last != '!') return false;
  const std::vector<std::string_view> w = words_of(s);
  if (w.size() < 3) return false;
  if (starts_lower(s)) return false;
  static constexpr std::array<std::string_view, 9> kPlaceholders = {"etw.", "jd.",  "jdn.", "jdm.", "jds.",
                                                                    "sb.",  "sth.", "usw.", "etc."};
  const std::string_view tail = w.back();
  for (std::string_view p : kPlaceholders)
    if (tail == p || (tail.size() > p.size() && tail.ends_with(p) && tail[tail.size() - p.size() - 1] == '/'))
      return false;
  if (s.find("...") != std::string_view::npos || s.find("\xE2\x80\xA6") != std::string_view::npos) return false;
  if (english && s.find('/') != std::string_view::npos) return false;
  return true;
}

// Removes every `open`..`close` span (an unclosed one is kept).
std::string remove_spans(std::string_view s, char open, char close) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == open) {
      const size_t e = s.find(close, i + 1);
      if (e != std::string_view::npos) {
        i = e + 1;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

std::string ding_clean_alternative(std::string_view alternative) {
  std::string_view first = alternative.substr(0, alternative.find("; "));
  std::string s = remove_spans(first, '{', '}');
  s = remove_spans(s, '[', ']');
  s = remove_spans(s, '<', '>');
  std::string out;
  for (std::string_view w : words_of(s)) {
    const bool punct_only = w.size() == 1 && std::string_view(".,?!;:").find(w[0]) != std::string_view::npos;
    if (!out.empty() && !punct_only) out += ' ';
    out += w;
  }
  return out;
}

std::vector<SentencePair> ding_sentence_pairs(std::string_view text, DingStats* stats) {
  DingStats st;
  std::vector<SentencePair> pairs;
  std::unordered_set<std::string> seen;
  for (std::string_view line : lines_of(text)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sep = line.find(" :: ");
    if (sep == std::string_view::npos) continue;
    ++st.lines;
    const auto de = split_at(line.substr(0, sep), " | ");
    const auto en = split_at(line.substr(sep + 4), " | ");
    if (de.size() != en.size()) {
      ++st.mismatched_lines;
      continue;
    }
    for (size_t i = 0; i < de.size(); ++i) {
      ++st.alternatives;
      SentencePair p{ding_clean_alternative(de[i]), ding_clean_alternative(en[i])};
      if (!looks_like_sentence(p.src, false) || !looks_like_sentence(p.tgt, true)) continue;
      if (!seen.insert(p.src).second) {
        ++st.duplicates;
        continue;
      }
      pairs.push_back(std::move(p));
    }
  }
  if (stats) *stats = st;
  return pairs;
}

std::vector<SentencePair> read_ding_sentence_pairs(const std::string& path, DingStats* stats) {
  const std::string text = read_whole_file(path, "the Ding dictionary (trans-de-en)");
  return ding_sentence_pairs(text, stats);
}

std::vector<SentencePair> read_parallel_files(const std::string& src_path, const std::string& tgt_path) {
  const std::string src_text = read_whole_file(src_path, "the source side of the parallel corpus");
  const std::string tgt_text = read_whole_file(tgt_path, "the target side of the parallel corpus");
  const std::vector<std::string_view> src = lines_of(src_text);
  const std::vector<std::string_view> tgt = lines_of(tgt_text);
  if (src.size() != tgt.size())
    throw UserError("parallel files differ in length: " + src_path + " has " + std::to_string(src.size()) +
                        " lines, " + tgt_path + " has " + std::to_string(tgt.size()) +
                        " lines; they must hold one sentence a line, aligned",
                    2);
  std::vector<SentencePair> pairs;
  pairs.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const std::string_view s = trim(src[i]), t = trim(tgt[i]);
    if (s.empty() || t.empty()) continue;
    pairs.push_back({std::string(s), std::string(t)});
  }
  return pairs;
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

TrainTestSplit split_train_test(const std::vector<SentencePair>& pairs, int64_t min_test) {
  std::vector<uint64_t> hash(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) hash[i] = fnv1a64(pairs[i].src);
  TrainTestSplit out;
  for (uint64_t m = 16;; m /= 2) {
    const auto n = std::count_if(hash.begin(), hash.end(), [m](uint64_t h) { return h % m == 0; });
    if (n >= min_test) {
      out.modulus = m;
      break;
    }
    if (m == 2)
      throw UserError("the corpus is too small to split: " + std::to_string(pairs.size()) +
                          " pairs give fewer than " + std::to_string(min_test) + " test pairs even with modulus 2",
                      2);
  }
  for (size_t i = 0; i < pairs.size(); ++i) (hash[i] % out.modulus == 0 ? out.test : out.train).push_back(pairs[i]);
  return out;
}

}  // namespace mlpd
