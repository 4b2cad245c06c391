#include "translation/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

namespace mlpd {

namespace {

// ---- UTF-8 ----

// Decodes the code point at s[i] and advances i. Bytes that do not start a valid sequence are
// returned one at a time as themselves (>= 0x80, never whitespace, never cased).
char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return s[i++];
  int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) return s[i++] & 0xFF;
  char32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return s[i++] & 0xFF;
    cp = (cp << 6) | (b & 0x3F);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Python's str.isspace(): Unicode White_Space plus the ASCII separators 0x1C-0x1F.
bool is_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---- Lowercasing (Python's str.lower) ----

// Unicode 14.0 simple lowercase mappings (UnicodeData.txt field 13; the table Python 3.11's
// str.lower() uses), as runs: code points first, first+stride, ..., last map to cp + delta.
struct LowerRun {
  char32_t first, last;
  int stride, delta;
};
constexpr LowerRun kLowerRuns[] = {
    {0x41, 0x5A, 1, 32}, {0xC0, 0xD6, 1, 32}, {0xD8, 0xDE, 1, 32}, {0x100, 0x12E, 2, 1}, {0x132, 0x136, 2, 1},
    {0x139, 0x147, 2, 1}, {0x14A, 0x176, 2, 1}, {0x178, 0x178, 1, -121}, {0x179, 0x17D, 2, 1},
    {0x181, 0x181, 1, 210}, {0x182, 0x184, 2, 1}, {0x186, 0x186, 1, 206}, {0x187, 0x187, 1, 1},
    {0x189, 0x18A, 1, 205}, {0x18B, 0x18B, 1, 1}, {0x18E, 0x18E, 1, 79}, {0x18F, 0x18F, 1, 202},
    {0x190, 0x190, 1, 203}, {0x191, 0x191, 1, 1}, {0x193, 0x193, 1, 205}, {0x194, 0x194, 1, 207},
    {0x196, 0x196, 1, 211}, {0x197, 0x197, 1, 209}, {0x198, 0x198, 1, 1}, {0x19C, 0x19C, 1, 211},
    {0x19D, 0x19D, 1, 213}, {0x19F, 0x19F, 1, 214}, {0x1A0, 0x1A4, 2, 1}, {0x1A6, 0x1A6, 1, 218},
    {0x1A7, 0x1A7, 1, 1}, {0x1A9, 0x1A9, 1, 218}, {0x1AC, 0x1AC, 1, 1}, {0x1AE, 0x1AE, 1, 218},
    {0x1AF, 0x1AF, 1, 1}, {0x1B1, 0x1B2, 1, 217}, {0x1B3, 0x1B5, 2, 1}, {0x1B7, 0x1B7, 1, 219},
    {0x1B8, 0x1B8, 1, 1}, {0x1BC, 0x1BC, 1, 1}, {0x1C4, 0x1C4, 1, 2}, {0x1C5, 0x1C5, 1, 1},
    {0x1C7, 0x1C7, 1, 2}, {0x1C8, 0x1C8, 1, 1}, {0x1CA, 0x1CA, 1, 2}, {0x1CB, 0x1DB, 2, 1},
    {0x1DE, 0x1EE, 2, 1}, {0x1F1, 0x1F1, 1, 2}, {0x1F2, 0x1F4, 2, 1}, {0x1F6, 0x1F6, 1, -97},
    {0x1F7, 0x1F7, 1, -56}, {0x1F8, 0x21E, 2, 1}, {0x220, 0x220, 1, -130}, {0x222, 0x232, 2, 1},
    {0x23A, 0x23A, 1, 10795}, {0x23B, 0x23B, 1, 1}, {0x23D, 0x23D, 1, -163}, {0x23E, 0x23E, 1, 10792},
    {0x241, 0x241, 1, 1}, {0x243, 0x243, 1, -195}, {0x244, 0x244, 1, 69}, {0x245, 0x245, 1, 71},
    {0x246, 0x24E, 2, 1}, {0x370, 0x372, 2, 1}, {0x376, 0x376, 1, 1}, {0x37F, 0x37F, 1, 116},
    {0x386, 0x386, 1, 38}, {0x388, 0x38A, 1, 37}, {0x38C, 0x38C, 1, 64}, {0x38E, 0x38F, 1, 63},
    {0x391, 0x3A1, 1, 32}, {0x3A3, 0x3AB, 1, 32}, {0x3CF, 0x3CF, 1, 8}, {0x3D8, 0x3EE, 2, 1},
    {0x3F4, 0x3F4, 1, -60}, {0x3F7, 0x3F7, 1, 1}, {0x3F9, 0x3F9, 1, -7}, {0x3FA, 0x3FA, 1, 1},
    {0x3FD, 0x3FF, 1, -130}, {0x400, 0x40F, 1, 80}, {0x410, 0x42F, 1, 32}, {0x460, 0x480, 2, 1},
    {0x48A, 0x4BE, 2, 1}, {0x4C0, 0x4C0, 1, 15}, {0x4C1, 0x4CD, 2, 1}, {0x4D0, 0x52E, 2, 1},
    {0x531, 0x556, 1, 48}, {0x10A0, 0x10C5, 1, 7264}, {0x10C7, 0x10C7, 1, 7264}, {0x10CD, 0x10CD, 1, 7264},
    {0x13A0, 0x13EF, 1, 38864}, {0x13F0, 0x13F5, 1, 8}, {0x1C90, 0x1CBA, 1, -3008},
    {0x1CBD, 0x1CBF, 1, -3008}, {0x1E00, 0x1E94, 2, 1}, {0x1E9E, 0x1E9E, 1, -7615}, {0x1EA0, 0x1EFE, 2, 1},
    {0x1F08, 0x1F0F, 1, -8}, {0x1F18, 0x1F1D, 1, -8}, {0x1F28, 0x1F2F, 1, -8}, {0x1F38, 0x1F3F, 1, -8},
    {0x1F48, 0x1F4D, 1, -8}, {0x1F59, 0x1F5F, 2, -8}, {0x1F68, 0x1F6F, 1, -8}, {0x1F88, 0x1F8F, 1, -8},
    {0x1F98, 0x1F9F, 1, -8}, {0x1FA8, 0x1FAF, 1, -8}, {0x1FB8, 0x1FB9, 1, -8}, {0x1FBA, 0x1FBB, 1, -74},
    {0x1FBC, 0x1FBC, 1, -9}, {0x1FC8, 0x1FCB, 1, -86}, {0x1FCC, 0x1FCC, 1, -9}, {0x1FD8, 0x1FD9, 1, -8},
    {0x1FDA, 0x1FDB, 1, -100}, {0x1FE8, 0x1FE9, 1, -8}, {0x1FEA, 0x1FEB, 1, -112}, {0x1FEC, 0x1FEC, 1, -7},
    {0x1FF8, 0x1FF9, 1, -128}, {0x1FFA, 0x1FFB, 1, -126}, {0x1FFC, 0x1FFC, 1, -9}, {0x2126, 0x2126, 1, -7517},
    {0x212A, 0x212A, 1, -8383}, {0x212B, 0x212B, 1, -8262}, {0x2132, 0x2132, 1, 28}, {0x2160, 0x216F, 1, 16},
    {0x2183, 0x2183, 1, 1}, {0x24B6, 0x24CF, 1, 26}, {0x2C00, 0x2C2F, 1, 48}, {0x2C60, 0x2C60, 1, 1},
    {0x2C62, 0x2C62, 1, -10743}, {0x2C63, 0x2C63, 1, -3814}, {0x2C64, 0x2C64, 1, -10727},
    {0x2C67, 0x2C6B, 2, 1}, {0x2C6D, 0x2C6D, 1, -10780}, {0x2C6E, 0x2C6E, 1, -10749},
    {0x2C6F, 0x2C6F, 1, -10783}, {0x2C70, 0x2C70, 1, -10782}, {0x2C72, 0x2C72, 1, 1}, {0x2C75, 0x2C75, 1, 1},
    {0x2C7E, 0x2C7F, 1, -10815}, {0x2C80, 0x2CE2, 2, 1}, {0x2CEB, 0x2CED, 2, 1}, {0x2CF2, 0x2CF2, 1, 1},
    {0xA640, 0xA66C, 2, 1}, {0xA680, 0xA69A, 2, 1}, {0xA722, 0xA72E, 2, 1}, {0xA732, 0xA76E, 2, 1},
    {0xA779, 0xA77B, 2, 1}, {0xA77D, 0xA77D, 1, -35332}, {0xA77E, 0xA786, 2, 1}, {0xA78B, 0xA78B, 1, 1},
    {0xA78D, 0xA78D, 1, -42280}, {0xA790, 0xA792, 2, 1}, {0xA796, 0xA7A8, 2, 1}, {0xA7AA, 0xA7AA, 1, -42308},
    {0xA7AB, 0xA7AB, 1, -42319}, {0xA7AC, 0xA7AC, 1, -42315}, {0xA7AD, 0xA7AD, 1, -42305},
    {0xA7AE, 0xA7AE, 1, -42308}, {0xA7B0, 0xA7B0, 1, -42258}, {0xA7B1, 0xA7B1, 1, -42282},
    {0xA7B2, 0xA7B2, 1, -42261}, {0xA7B3, 0xA7B3, 1, 928}, {0xA7B4, 0xA7C2, 2, 1}, {0xA7C4, 0xA7C4, 1, -48},
    {0xA7C5, 0xA7C5, 1, -42307}, {0xA7C6, 0xA7C6, 1, -35384}, {0xA7C7, 0xA7C9, 2, 1}, {0xA7D0, 0xA7D0, 1, 1},
    {0xA7D6, 0xA7D8, 2, 1}, {0xA7F5, 0xA7F5, 1, 1}, {0xFF21, 0xFF3A, 1, 32}, {0x10400, 0x10427, 1, 40},
    {0x104B0, 0x104D3, 1, 40}, {0x10570, 0x1057A, 1, 39}, {0x1057C, 0x1058A, 1, 39},
    {0x1058C, 0x10592, 1, 39}, {0x10594, 0x10595, 1, 39}, {0x10C80, 0x10CB2, 1, 64},
    {0x118A0, 0x118BF, 1, 32}, {0x16E40, 0x16E5F, 1, 32}, {0x1E900, 0x1E921, 1, 34},
};

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  auto it = std::upper_bound(std::begin(kLowerRuns), std::end(kLowerRuns), c,
                             [](char32_t v, const LowerRun& r) { return v < r.first; });
  if (it == std::begin(kLowerRuns)) return c;
  const LowerRun& r = *(it - 1);
  if (c > r.last || (c - r.first) % r.stride != 0) return c;
  return static_cast<char32_t>(static_cast<int64_t>(c) + r.delta);
}

// Approximations of Unicode's Cased and Case_Ignorable properties, used only for Greek final
// sigma: a letter with a lowercase mapping, or a common lowercase letter (Latin, Greek, Cyrillic).
bool is_cased(char32_t c) {
  if (simple_lower(c) != c) return true;
  return (c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7) || (c >= 0x100 && c <= 0x24F) ||
         (c >= 0x3AC && c <= 0x3CE) || (c >= 0x1F00 && c <= 0x1FFF) || (c >= 0x430 && c <= 0x45F);
}
bool is_case_ignorable(char32_t c) {
  return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xA8 || c == 0xAD || c == 0xAF ||
         c == 0xB4 || c == 0xB7 || c == 0xB8 || c == 0x2019 || (c >= 0x300 && c <= 0x36F);
}

// ---- 13a ----

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// mteval's symbol class: { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  /
// (not ' , - . nor digits or letters).
bool is_13a_symbol(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
         (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == 0x2F;
}

// One left-to-right pass over byte pairs (a regex `(X)(Y)` substituted without overlaps): where
// match(s[i], s[i+1]) holds, emit(out, s[i], s[i+1]) and skip both, else copy s[i]. On valid UTF-8
// this equals the code-point regex, since X and Y here each contain ASCII on one side.
template <typename Match, typename Emit>
std::string pair_pass(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string join_tokens(std::string_view text) {
  std::string out;
  for (std::string_view t : split_unicode_whitespace(text)) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::string_view rstrip(std::string_view s) {
  size_t end = 0;  // the end of the last non-space code point
  for (size_t i = 0; i < s.size();) {
    if (!is_space(next_code_point(s, i))) end = i;
  }
  return s.substr(0, end);
}

// n-gram counts per order, each key the n tokens joined by spaces (tokens hold no whitespace).
using NgramCounts = std::unordered_map<std::string, int64_t>;
std::vector<NgramCounts> count_ngrams(const std::vector<std::string_view>& toks) {
  std::vector<NgramCounts> counts(kBleuMaxOrder);
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    for (size_t i = 0; i + n <= toks.size(); ++i) {
      std::string key(toks[i]);
      for (int k = 1; k < n; ++k) (key += ' ') += toks[i + k];
      ++counts[n - 1][key];
    }
  }
  return counts;
}

}  // namespace

std::optional<BleuTokenizer> parse_bleu_tokenizer(std::string_view name) {
  if (name == "13a") return BleuTokenizer::k13a;
  if (name == "none") return BleuTokenizer::kNone;
  return std::nullopt;
}

const char* bleu_tokenizer_name(BleuTokenizer t) { return t == BleuTokenizer::k13a ? "13a" : "none"; }

std::vector<std::string_view> split_unicode_whitespace(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = std::string_view::npos;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (is_space(next_code_point(s, i))) {
      if (start != std::string_view::npos) out.push_back(s.substr(start, at - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = at;
    }
  }
  if (start != std::string_view::npos) out.push_back(s.substr(start));
  return out;
}

bool is_valid_utf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 1;
    char32_t min = 0;
    if (b0 >= 0x80) {
      if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, min = 0x80;
      else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, min = 0x800;
      else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, min = 0x10000;
      else len = 0;
    }
    bool ok = len > 0 && i + len <= s.size();
    char32_t cp = len > 1 ? (b0 & (0x7F >> len)) : b0;
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string unicode_lower(std::string_view s) {
  // Decoded first: final sigma looks at its neighbours. raw: an undecodable byte, copied as is.
  struct Unit {
    char32_t cp;
    bool raw;
  };
  std::vector<Unit> units;
  units.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = next_code_point(s, i);
    units.push_back({c, c >= 0x80 && i - at == 1});
  }
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < units.size(); ++k) {
    const char32_t c = units[k].cp;
    if (units[k].raw) {
      out += static_cast<char>(c);
    } else if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE
      out += 'i';
      append_utf8(out, 0x307);
    } else if (c == 0x3A3) {  // GREEK CAPITAL SIGMA: final form after a cased letter, not before one
      size_t b = k, a = k + 1;
      while (b > 0 && is_case_ignorable(units[b - 1].cp)) --b;
      while (a < units.size() && is_case_ignorable(units[a].cp)) ++a;
      const bool final_sigma = b > 0 && is_cased(units[b - 1].cp) && !(a < units.size() && is_cased(units[a].cp));
      append_utf8(out, final_sigma ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, simple_lower(c));
    }
  }
  return out;
}

std::string tokenize_13a(std::string_view line) {
  std::string s(line);
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
  }
  // Symbols become tokens of their own.
  std::string t;
  t.reserve(s.size() * 2 + 2);
  t += ' ';
  for (char c : s) {
    if (is_13a_symbol(c)) {
      t += ' ';
      t += c;
      t += ' ';
    } else {
      t += c;
    }
  }
  t += ' ';
  auto period_comma = [](char c) { return c == '.' || c == ','; };
  // A period or comma after a non-digit: "x." -> "x . "
  t = pair_pass(
      t, [&](char a, char b) { return !is_digit(a) && period_comma(b); },
      [](std::string& o, char a, char b) { ((o += a) += ' ') += b, o += ' '; });
  // A period or comma before a non-digit: ".x" -> " . x"
  t = pair_pass(
      t, [&](char a, char b) { return period_comma(a) && !is_digit(b); },
      [](std::string& o, char a, char b) { ((o += ' ') += a) += ' ', o += b; });
  // A dash after a digit: "3-" -> "3 - "
  t = pair_pass(
      t, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](std::string& o, char a, char b) { ((o += a) += ' ') += b, o += ' '; });
  return join_tokens(t);
}

std::string bleu_preprocess(std::string_view segment, const BleuOptions& opts) {
  std::string s = opts.lowercase ? unicode_lower(segment) : std::string(segment);
  s = std::string(rstrip(s));
  return opts.tokenize == BleuTokenizer::k13a ? tokenize_13a(s) : s;
}

std::vector<double> BleuStats::to_vector() const {
  std::vector<double> v;
  v.reserve(kSize);
  for (int64_t m : matches) v.push_back(static_cast<double>(m));
  for (int64_t t : totals) v.push_back(static_cast<double>(t));
  v.push_back(static_cast<double>(hyp_len));
  v.push_back(static_cast<double>(ref_len));
  return v;
}

BleuStats BleuStats::from_vector(const std::vector<double>& v) {
  if (v.size() != static_cast<size_t>(kSize))
    throw std::invalid_argument("BleuStats::from_vector: expected " + std::to_string(kSize) + " values, got " +
                                std::to_string(v.size()));
  auto whole = [&](size_t i) {
    const double x = v[i];
    if (!(x >= 0) || x != std::floor(x) || x > 9007199254740992.0)
      throw std::invalid_argument("BleuStats::from_vector: value " + std::to_string(i) + " is not a count");
    return static_cast<int64_t>(x);
  };
  BleuStats s;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    s.matches[n] = whole(n);
    s.totals[n] = whole(kBleuMaxOrder + n);
  }
  s.hyp_len = whole(2 * kBleuMaxOrder);
  s.ref_len = whole(2 * kBleuMaxOrder + 1);
  return s;
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    matches[n] += o.matches[n];
    totals[n] += o.totals[n];
  }
  hyp_len += o.hyp_len;
  ref_len += o.ref_len;
  return *this;
}

BleuStats sentence_bleu_stats(std::string_view hyp, std::string_view ref, const BleuOptions& opts) {
  const std::string h = bleu_preprocess(hyp, opts);
  const std::string r = bleu_preprocess(ref, opts);
  const std::vector<std::string_view> ht = split_unicode_whitespace(h);
  const std::vector<std::string_view> rt = split_unicode_whitespace(r);
  const std::vector<NgramCounts> hc = count_ngrams(ht);
  const std::vector<NgramCounts> rc = count_ngrams(rt);
  BleuStats s;
  s.hyp_len = static_cast<int64_t>(ht.size());
  s.ref_len = static_cast<int64_t>(rt.size());
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    for (const auto& [gram, count] : hc[n]) {
      s.totals[n] += count;
      auto it = rc[n].find(gram);
      if (it != rc[n].end()) s.matches[n] += std::min(count, it->second);
    }
  }
  return s;
}

BleuScore corpus_bleu(const BleuStats& st) {
  BleuScore r;
  r.hyp_len = st.hyp_len;
  r.ref_len = st.ref_len;
  const double hyp = static_cast<double>(st.hyp_len), ref = static_cast<double>(st.ref_len);
  r.ratio = st.ref_len > 0 ? hyp / ref : 0.0;
  r.bp = 1.0;
  if (st.hyp_len < st.ref_len) r.bp = st.hyp_len > 0 ? std::exp(1.0 - ref / hyp) : 0.0;
  // The operations below are sacreBLEU's, in its order, so that the doubles agree bit for bit.
  if (std::all_of(std::begin(st.matches), std::end(st.matches), [](int64_t m) { return m == 0; })) return r;
  double smooth = 1.0;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (st.totals[n] == 0) break;  // no n-gram of this order: the score is 0 (log floor below)
    if (st.matches[n] == 0) {
      smooth *= 2;  // "exp" smoothing (mteval's): 1/2, 1/4, ... of a match
      r.precisions[n] = 100.0 / (smooth * static_cast<double>(st.totals[n]));
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(st.matches[n]) / static_cast<double>(st.totals[n]);
    }
  }
  double sum_log = 0;
  for (double p : r.precisions) sum_log += p == 0.0 ? -9999999999.0 : std::log(p);
  r.score = r.bp * std::exp(sum_log / kBleuMaxOrder);
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& opts) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument("corpus_bleu: " + std::to_string(hyps.size()) + " hypotheses but " +
                                std::to_string(refs.size()) + " references");
  BleuStats total;
  for (size_t i = 0; i < hyps.size(); ++i) total += sentence_bleu_stats(hyps[i], refs[i], opts);
  return corpus_bleu(total);
}

std::string format_sacrebleu(const BleuScore& s, int width) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "BLEU = %.*f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                width, s.score, s.precisions[0], s.precisions[1], s.precisions[2], s.precisions[3], s.bp, s.ratio,
                static_cast<long long>(s.hyp_len), static_cast<long long>(s.ref_len));
  return buf;
}

}  // namespace mlpd
