// A joint byte-pair-encoding subword vocabulary for the translation workloads: learned on the
// training split (both languages together), deterministic, stored with the prepared data.
//
// Symbols (ids):
//   0 <pad>, 1 <s> (bos), 2 </s> (eos), 3 <unk>: the specials;
//   4 .. 4+C-1: the base symbols, one UTF-8 character each (a byte that is not valid UTF-8 counts
//               as a character of its own), in increasing byte order; the word-initial marker
//               U+2581 is always one of them;
//   4+C ..:     one symbol per merge, merges[k] = (left, right) giving id 4+C+k whose text is
//               symbols[left] + symbols[right].
// Pre-tokenization: the text is split at ASCII whitespace into words; a word is split further into
// pre-tokens, each punctuation character (ASCII punctuation and the typographic quotes, dashes,
// guillemets and ellipsis of U+2010..U+2027, U+00AB, U+00BB, U+00A1, U+00BF) being one and each
// run of other characters another; a word's first pre-token starts with the marker U+2581. BPE
// never merges across pre-tokens. Decoding concatenates the symbols' texts, turns each marker into
// a space and drops the first space, so decode(encode(t)) == t for every text t whose characters
// were all seen in training and that holds no U+2581, once runs of whitespace in t are collapsed
// to one space and its ends trimmed. A character outside the base symbols (and a U+2581 in the
// text) encodes to <unk>, which decodes to the text "<unk>".
// Learning: characters are counted over all pre-tokens (each distinct pre-token weighted by its
// frequency); when there are more than vocab_size - 4, only the most frequent are kept (ties: byte
// order). Then, until there are vocab_size symbols, the most frequent adjacent pair of symbols
// within pre-tokens is merged (ties: the smaller (left id, right id)); a merge applies to every
// non-overlapping occurrence, left to right. Learning stops early when no pair occurs twice. The
// result depends only on the multiset of texts, not on their order.
// Encoding a pre-token applies the merges by rank: repeatedly the adjacent pair with the earliest
// merge is merged at every non-overlapping occurrence, left to right (as in learning).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mlpd {

struct BpeIndex;  // lookup tables and the word cache, built by make_bpe

struct Bpe {
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;
  static constexpr int32_t kUnk = 3;
  static constexpr int32_t kNumSpecials = 4;

  std::vector<std::string> symbols;                    // [vocab] text of each id (layout above)
  std::vector<std::pair<int32_t, int32_t>> merges;     // [M] merge k produces id first_merge_id() + k
  std::shared_ptr<BpeIndex> index;                     // built by make_bpe; shared by copies

  int32_t vocab_size() const { return static_cast<int32_t>(symbols.size()); }
  int32_t first_merge_id() const { return static_cast<int32_t>(symbols.size() - merges.size()); }
};

// The word-initial marker U+2581 in UTF-8.
inline constexpr std::string_view kBpeMarker = "\xE2\x96\x81";

// Builds a Bpe from its stored parts after checking them (the specials' texts, each base symbol one
// character, in increasing byte order and the marker among them, each merge's ids earlier than its
// own and its text the concatenation); std::invalid_argument naming what is wrong otherwise.
// Treat the result as immutable: encode caches per pre-token.
Bpe make_bpe(std::vector<std::string> symbols, std::vector<std::pair<int32_t, int32_t>> merges);

// Learns a vocabulary of at most vocab_size symbols (specials included) from `texts`.
// UserError (exit 2) when vocab_size < 5.
Bpe learn_bpe(const std::vector<std::string>& texts, int vocab_size);

// Token ids of `text` (no bos/eos). Thread-safe; repeated pre-tokens come from a cache.
std::vector<int32_t> encode(const Bpe& bpe, std::string_view text);
// The text of `tokens`: stops at the first eos, skips pad and bos; ids outside the vocabulary
// are std::out_of_range.
std::string decode(const Bpe& bpe, std::span<const int32_t> tokens);

// What decode(encode(text)) gives for a text whose characters are all known: runs of ASCII
// whitespace collapsed to one space, the ends trimmed.
std::string normalize_whitespace(std::string_view text);

}  // namespace mlpd
