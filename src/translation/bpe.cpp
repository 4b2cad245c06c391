#include "translation/bpe.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <queue>
#include <stdexcept>

#include "core/check.h"

namespace mlpd {

struct BpeIndex {
  std::unordered_map<std::string, int32_t> char_id;  // base symbol text -> id
  std::unordered_map<uint64_t, int32_t> merge_rank;  // (left << 32 | right) -> k
  std::vector<std::string> text;                     // what decode writes for each id
  int32_t marker_id = -1;
  int32_t first_merge = 0;
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>> cache;  // pre-token key -> tokens
};

namespace {

constexpr const char* kSpecialText[Bpe::kNumSpecials] = {"<pad>", "<s>", "</s>", "<unk>"};
constexpr size_t kMaxCachedWords = size_t{1} << 20;

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Length of the UTF-8 character at s[i]: 1..4, or 1 for a byte that does not start a valid one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3;
  else if (c >= 0xF0 && c <= 0xF4) n = 4;
  if (n == 1 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  // Overlong and surrogate forms, and code points above U+10FFFF.
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
    return 1;
  return n;
}

bool is_punctuation(std::string_view ch) {
  if (ch.size() == 1) {
    const char c = ch[0];
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
  }
  if (ch.size() == 2) {  // U+00A1 ¡, U+00AB «, U+00BB », U+00BF ¿
    return ch == "\xC2\xA1" || ch == "\xC2\xAB" || ch == "\xC2\xBB" || ch == "\xC2\xBF";
  }
  if (ch.size() == 3 && ch[0] == '\xE2' && ch[1] == '\x80') {  // U+2010..U+2027
    const auto c = static_cast<unsigned char>(ch[2]);
    return c >= 0x90 && c <= 0xA7;
  }
  return false;
}

// Calls emit(initial, raw) for each pre-token of `text` (layout in bpe.h).
template <class F>
void pretokenize(std::string_view text, F&& emit) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t end = i;
    while (end < text.size() && !is_space(text[end])) ++end;
    bool initial = true;
    size_t run = i;  // start of the current run of non-punctuation characters
    for (size_t p = i; p < end;) {
      const size_t n = utf8_len(text, p);
      if (is_punctuation(text.substr(p, n))) {
        if (p > run) {
          emit(initial, text.substr(run, p - run));
          initial = false;
        }
        emit(initial, text.substr(p, n));
        initial = false;
        run = p + n;
      }
      p += n;
    }
    if (end > run) emit(initial, text.substr(run, end - run));
    i = end;
  }
}

std::string cache_key(bool initial, std::string_view raw) {
  std::string k;
  k.reserve(raw.size() + 1);
  k += initial ? '\x01' : '\x00';
  k += raw;
  return k;
}

// The characters of a pre-token as symbol ids: the marker first when word-initial; a character
// that is not a base symbol, or a literal marker, is <unk>.
void char_ids(const BpeIndex& ix, bool initial, std::string_view raw, std::vector<int32_t>& out) {
  out.clear();
  if (initial) out.push_back(ix.marker_id);
  for (size_t p = 0; p < raw.size();) {
    const size_t n = utf8_len(raw, p);
    const std::string_view ch = raw.substr(p, n);
    int32_t id = Bpe::kUnk;
    if (ch != kBpeMarker) {
      auto it = ix.char_id.find(std::string(ch));
      if (it != ix.char_id.end()) id = it->second;
    }
    out.push_back(id);
    p += n;
  }
}

// Replaces every non-overlapping occurrence of (a, b), left to right, by c. Returns whether any.
bool merge_in(std::vector<int32_t>& w, int32_t a, int32_t b, int32_t c) {
  size_t out = 0;
  bool any = false;
  for (size_t i = 0; i < w.size();) {
    if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
      w[out++] = c;
      i += 2;
      any = true;
    } else {
      w[out++] = w[i++];
    }
  }
  w.resize(out);
  return any;
}

void apply_merges(const Bpe& bpe, const BpeIndex& ix, std::vector<int32_t>& w) {
  while (w.size() >= 2) {
    int32_t best = INT32_MAX;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ix.merge_rank.find(pair_key(w[i], w[i + 1]));
      if (it != ix.merge_rank.end()) best = std::min(best, it->second);
    }
    if (best == INT32_MAX) return;
    const auto& m = bpe.merges[static_cast<size_t>(best)];
    merge_in(w, m.first, m.second, ix.first_merge + best);
  }
}

}  // namespace

std::string normalize_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t b = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > b) {
      if (!out.empty()) out += ' ';
      out.append(text.substr(b, i - b));
    }
  }
  return out;
}

Bpe make_bpe(std::vector<std::string> symbols, std::vector<std::pair<int32_t, int32_t>> merges) {
  auto bad = [](const std::string& why) { throw std::invalid_argument("BPE vocabulary: " + why); };
  if (symbols.size() > static_cast<size_t>(INT32_MAX)) bad("too many symbols");
  if (symbols.size() < static_cast<size_t>(Bpe::kNumSpecials) + 1 + merges.size())
    bad(std::to_string(symbols.size()) + " symbols cannot hold the 4 specials, the marker and " +
        std::to_string(merges.size()) + " merges");
  for (int32_t i = 0; i < Bpe::kNumSpecials; ++i)
    if (symbols[static_cast<size_t>(i)] != kSpecialText[i])
      bad("symbol " + std::to_string(i) + " is '" + symbols[static_cast<size_t>(i)] + "', expected '" +
          kSpecialText[i] + "'");
  auto ix = std::make_shared<BpeIndex>();
  ix->first_merge = static_cast<int32_t>(symbols.size() - merges.size());
  for (int32_t id = Bpe::kNumSpecials; id < ix->first_merge; ++id) {
    const std::string& s = symbols[static_cast<size_t>(id)];
    if (s.empty() || utf8_len(s, 0) != s.size()) bad("base symbol " + std::to_string(id) + " is not one character");
    if (id > Bpe::kNumSpecials && !(symbols[static_cast<size_t>(id) - 1] < s))
      bad("base symbol " + std::to_string(id) + " is not in increasing byte order");
    ix->char_id.emplace(s, id);
    if (s == kBpeMarker) ix->marker_id = id;
  }
  if (ix->marker_id < 0) bad("the word-initial marker U+2581 is not a base symbol");
  for (size_t k = 0; k < merges.size(); ++k) {
    const int32_t id = ix->first_merge + static_cast<int32_t>(k);
    const auto [a, b] = merges[k];
    if (a < Bpe::kNumSpecials || b < Bpe::kNumSpecials || a >= id || b >= id)
      bad("merge " + std::to_string(k) + " joins ids " + std::to_string(a) + " and " + std::to_string(b) +
          ", outside [4, " + std::to_string(id) + ")");
    if (symbols[static_cast<size_t>(id)] != symbols[static_cast<size_t>(a)] + symbols[static_cast<size_t>(b)])
      bad("symbol " + std::to_string(id) + " is not the concatenation of merge " + std::to_string(k));
    if (!ix->merge_rank.emplace(pair_key(a, b), static_cast<int32_t>(k)).second)
      bad("merge " + std::to_string(k) + " repeats an earlier one");
  }
  ix->text.resize(symbols.size());
  ix->text[Bpe::kUnk] = kSpecialText[Bpe::kUnk];
  for (size_t id = Bpe::kNumSpecials; id < symbols.size(); ++id) {
    std::string t;
    const std::string& s = symbols[id];
    for (size_t p = 0; p < s.size();) {
      if (s.compare(p, kBpeMarker.size(), kBpeMarker) == 0) {
        t += ' ';
        p += kBpeMarker.size();
      } else {
        t += s[p++];
      }
    }
    ix->text[id] = std::move(t);
  }
  Bpe bpe;
  bpe.symbols = std::move(symbols);
  bpe.merges = std::move(merges);
  bpe.index = std::move(ix);
  return bpe;
}

Bpe learn_bpe(const std::vector<std::string>& texts, int vocab_size) {
  if (vocab_size < Bpe::kNumSpecials + 1)
    throw UserError("BPE vocabulary size " + std::to_string(vocab_size) +
                        " is too small: at least 5 (4 specials and the word-initial marker)",
                    2);
  // Distinct pre-tokens and their counts, in a fixed (sorted) order.
  std::unordered_map<std::string, int64_t> counted;
  for (const std::string& t : texts)
    pretokenize(t, [&](bool initial, std::string_view raw) { ++counted[cache_key(initial, raw)]; });
  std::vector<std::pair<std::string, int64_t>> words(counted.begin(), counted.end());
  counted.clear();
  std::sort(words.begin(), words.end());

  // Base characters: the marker and the most frequent others.
  std::unordered_map<std::string, int64_t> char_count;
  for (const auto& [key, n] : words) {
    const std::string_view raw = std::string_view(key).substr(1);
    for (size_t p = 0; p < raw.size();) {
      const size_t len = utf8_len(raw, p);
      const std::string_view ch = raw.substr(p, len);
      if (ch != kBpeMarker) char_count[std::string(ch)] += n;
      p += len;
    }
  }
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::sort(chars.begin(), chars.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  const size_t room = static_cast<size_t>(vocab_size - Bpe::kNumSpecials - 1);
  if (chars.size() > room) chars.resize(room);
  std::vector<std::string> base{std::string(kBpeMarker)};
  for (auto& c : chars) base.push_back(std::move(c.first));
  std::sort(base.begin(), base.end());

  std::vector<std::string> symbols(kSpecialText, kSpecialText + Bpe::kNumSpecials);
  symbols.insert(symbols.end(), base.begin(), base.end());
  std::vector<std::pair<int32_t, int32_t>> merges;
  Bpe start = make_bpe(symbols, {});
  const BpeIndex& ix0 = *start.index;

  // Each distinct pre-token as symbol ids; pair counts weighted by the pre-token's count, and for
  // each pair the pre-tokens it may occur in (stale entries are skipped when used).
  const size_t W = words.size();
  std::vector<std::vector<int32_t>> seq(W);
  std::vector<int64_t> freq(W);
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < W; ++w) {
    const std::string_view key = words[w].first;
    char_ids(ix0, key[0] == '\x01', key.substr(1), seq[w]);
    freq[w] = words[w].second;
    const auto& s = seq[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == Bpe::kUnk || s[i + 1] == Bpe::kUnk) continue;
      const uint64_t k = pair_key(s[i], s[i + 1]);
      pair_count[k] += freq[w];
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  }
  words.clear();

  // Max-heap on (count, then the smaller key); entries are checked against pair_count when popped.
  struct Entry {
    int64_t count;
    uint64_t key;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : key > o.key; }
  };
  std::priority_queue<Entry> heap;
  for (const auto& [k, n] : pair_count) heap.push({n, k});

  std::vector<int32_t> stamp(W, -1);
  std::unordered_map<uint64_t, int64_t> delta;
  auto add_pairs = [&](const std::vector<int32_t>& s, int64_t f, int32_t new_id, int32_t w) {
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == Bpe::kUnk || s[i + 1] == Bpe::kUnk) continue;
      const uint64_t k = pair_key(s[i], s[i + 1]);
      delta[k] += f;
      if (f > 0 && (s[i] == new_id || s[i + 1] == new_id)) where[k].push_back(w);
    }
  };
  while (symbols.size() < static_cast<size_t>(vocab_size) && !heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    auto it = pair_count.find(e.key);
    if (it == pair_count.end() || it->second != e.count) continue;  // stale
    if (e.count < 2) break;
    const auto a = static_cast<int32_t>(e.key >> 32), b = static_cast<int32_t>(e.key & 0xFFFFFFFFu);
    const auto c = static_cast<int32_t>(symbols.size());
    symbols.push_back(symbols[static_cast<size_t>(a)] + symbols[static_cast<size_t>(b)]);
    merges.emplace_back(a, b);
    delta.clear();
    std::vector<int32_t> list = std::move(where[e.key]);
    where.erase(e.key);
    for (int32_t w : list) {
      if (stamp[static_cast<size_t>(w)] == c) continue;
      stamp[static_cast<size_t>(w)] = c;
      auto& s = seq[static_cast<size_t>(w)];
      std::vector<int32_t> merged = s;
      if (!merge_in(merged, a, b, c)) continue;
      add_pairs(s, -freq[static_cast<size_t>(w)], c, w);
      s = std::move(merged);
      add_pairs(s, freq[static_cast<size_t>(w)], c, w);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& n = pair_count[k];
      n += d;
      if (n <= 0) {
        pair_count.erase(k);
        where.erase(k);
      } else {
        heap.push({n, k});
      }
    }
  }
  return make_bpe(std::move(symbols), std::move(merges));
}

std::vector<int32_t> encode(const Bpe& bpe, std::string_view text) {
  MLPD_CHECK(bpe.index, "encode: the Bpe was not built by make_bpe, learn_bpe or load_translation_data");
  BpeIndex& ix = *bpe.index;
  std::vector<int32_t> out;
  std::vector<int32_t> w;
  pretokenize(text, [&](bool initial, std::string_view raw) {
    std::string key = cache_key(initial, raw);
    {
      std::lock_guard<std::mutex> lock(ix.mutex);
      auto it = ix.cache.find(key);
      if (it != ix.cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    char_ids(ix, initial, raw, w);
    apply_merges(bpe, ix, w);
    out.insert(out.end(), w.begin(), w.end());
    std::lock_guard<std::mutex> lock(ix.mutex);
    if (ix.cache.size() >= kMaxCachedWords) ix.cache.clear();
    ix.cache.emplace(std::move(key), w);
  });
  return out;
}

std::string decode(const Bpe& bpe, std::span<const int32_t> tokens) {
  MLPD_CHECK(bpe.index, "decode: the Bpe was not built by make_bpe, learn_bpe or load_translation_data");
  const BpeIndex& ix = *bpe.index;
  std::string out;
  for (int32_t t : tokens) {
    if (t == Bpe::kEos) break;
    if (t < 0 || static_cast<size_t>(t) >= ix.text.size())
      throw std::out_of_range("decode: token " + std::to_string(t) + " outside the vocabulary of " +
                              std::to_string(ix.text.size()));
    out += ix.text[static_cast<size_t>(t)];
  }
  if (!out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace mlpd
