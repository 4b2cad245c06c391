#include "translation/translation_data.h"

#include <algorithm>
#include <stdexcept>

#include "core/check.h"
#include "datasets/h5.h"
#include "datasets/layout.h"

namespace mlpd {

namespace {

constexpr const char* kSrcLang = "src_lang";
constexpr const char* kTgtLang = "tgt_lang";
constexpr const char* kVocabSize = "vocab_size";
constexpr const char* kSelection = "selection";
constexpr const char* kSplitRule = "split";
constexpr const char* kVocab = "vocab";
constexpr const char* kTest = "test";
constexpr int64_t kMaxPairs = int64_t{1} << 40;
constexpr hsize_t kBlock = hsize_t{1} << 20;  // token ids checked per read

// --- writing -------------------------------------------------------------------------------------

template <class T>
void write_1d(hid_t group, const char* name, hid_t file_type, hid_t mem_type, const T* data, size_t n) {
  const hsize_t dims[1] = {n};
  H5Id space(H5_CHECK(H5Screate_simple(1, dims, nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (n) H5_CHECK(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

void write_i32(hid_t g, const char* name, const std::vector<int32_t>& v) {
  write_1d(g, name, H5T_STD_I32LE, H5T_NATIVE_INT32, v.data(), v.size());
}
void write_i64(hid_t g, const char* name, const std::vector<int64_t>& v) {
  write_1d(g, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v.data(), v.size());
}

// Strings as concatenated bytes `name` plus `offsets_name` [n+1].
void write_strings(hid_t g, const char* name, const char* offsets_name, const std::vector<std::string>& v) {
  std::string bytes;
  std::vector<int64_t> offsets{0};
  for (const std::string& s : v) {
    bytes += s;
    offsets.push_back(static_cast<int64_t>(bytes.size()));
  }
  write_1d(g, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, bytes.data(), bytes.size());
  write_i64(g, offsets_name, offsets);
}

void write_split(hid_t file, const char* name, const TokenizedSplit& s, bool with_text) {
  H5Id g(H5_CHECK(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  h5_write_attr_i64(g, layout::kAttrCount, s.size());
  write_i32(g, "src_tokens", s.src_tokens);
  write_i64(g, "src_offsets", s.src_offsets);
  write_i32(g, "tgt_tokens", s.tgt_tokens);
  write_i64(g, "tgt_offsets", s.tgt_offsets);
  if (with_text) {
    write_strings(g, "src_text", "src_text_offsets", s.src_text);
    write_strings(g, "tgt_text", "tgt_text_offsets", s.tgt_text);
  }
}

// --- reading -------------------------------------------------------------------------------------

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string s;
  for (hsize_t d : dims) s += (s.empty() ? "[" : ", ") + std::to_string(d);
  return s + "]";
}

void expect_dims(const std::string& name, const std::vector<hsize_t>& dims, const std::vector<hsize_t>& want) {
  if (dims != want) throw H5LayoutError(name + " is " + dims_text(dims) + ", expected " + dims_text(want));
}

template <class T>
void read_all(hid_t file, const std::string& name, hid_t mem_type, T* out, size_t n) {
  if (n == 0) return;
  H5Id ds(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  H5_CHECK(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
}

// An offsets array [n+1] that starts at 0, never decreases; returns its last value.
std::vector<int64_t> read_offsets(hid_t file, const std::string& name, int64_t n) {
  const auto dims = h5_int_dataset_extents(file, name, 8, true, 1);
  expect_dims(name, dims, {static_cast<hsize_t>(n) + 1});
  std::vector<int64_t> v(static_cast<size_t>(n) + 1);
  read_all(file, name, H5T_NATIVE_INT64, v.data(), v.size());
  if (v[0] != 0) throw H5LayoutError(name + " starts at " + std::to_string(v[0]) + ", not 0");
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1])
      throw H5LayoutError(name + " decreases at index " + std::to_string(i) + " (" + std::to_string(v[i - 1]) +
                          " then " + std::to_string(v[i]) + ")");
  return v;
}

void expect_end(const std::string& offsets_name, const std::vector<int64_t>& offsets, const std::string& data_name,
                hsize_t data_len) {
  if (static_cast<hsize_t>(offsets.back()) != data_len)
    throw H5LayoutError(offsets_name + " ends at " + std::to_string(offsets.back()) + " but " + data_name + " holds " +
                        std::to_string(data_len) + " elements");
}

// Token ids of int32 dataset `name`, checked to lie in [0, vocab) block by block; kept in *keep
// when not null.
void scan_tokens(hid_t file, const std::string& name, int32_t vocab, const std::vector<int64_t>& offsets,
                 const std::string& offsets_name, std::vector<int32_t>* keep) {
  const auto dims = h5_int_dataset_extents(file, name, 4, true, 1);
  expect_end(offsets_name, offsets, name, dims[0]);
  const hsize_t n = dims[0];
  if (n == 0) return;
  std::vector<int32_t> scratch;
  if (keep) keep->resize(static_cast<size_t>(n));
  else scratch.resize(static_cast<size_t>(std::min(n, kBlock)));
  H5Id ds(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  H5Id fspace(H5_CHECK(H5Dget_space(ds)));
  for (hsize_t start = 0; start < n; start += kBlock) {
    const hsize_t count = std::min(kBlock, n - start);
    int32_t* buf = keep ? keep->data() + start : scratch.data();
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr));
    H5Id mspace(H5_CHECK(H5Screate_simple(1, &count, nullptr)));
    H5_CHECK(H5Dread(ds, H5T_NATIVE_INT32, mspace, fspace, H5P_DEFAULT, buf));
    for (hsize_t i = 0; i < count; ++i)
      if (buf[i] < 0 || buf[i] >= vocab)
        throw H5LayoutError(name + " holds token id " + std::to_string(buf[i]) + " at index " +
                            std::to_string(start + i) + ", outside [0, " + std::to_string(vocab) + ")");
  }
}

// Strings stored as bytes + offsets [n+1]; split into *keep when not null.
void read_strings(hid_t file, const std::string& name, const std::string& offsets_name, int64_t n,
                  std::vector<std::string>* keep) {
  const std::vector<int64_t> off = read_offsets(file, offsets_name, n);
  const auto dims = h5_int_dataset_extents(file, name, 1, false, 1);
  expect_end(offsets_name, off, name, dims[0]);
  if (!keep) return;
  std::string bytes(static_cast<size_t>(dims[0]), '\0');
  read_all(file, name, H5T_NATIVE_UINT8, reinterpret_cast<uint8_t*>(bytes.data()), bytes.size());
  keep->clear();
  keep->reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    keep->emplace_back(bytes, static_cast<size_t>(off[static_cast<size_t>(i)]),
                       static_cast<size_t>(off[static_cast<size_t>(i) + 1] - off[static_cast<size_t>(i)]));
}

void read_split(hid_t file, const char* split, int32_t vocab, bool with_text, TokenizedSplit* keep) {
  const std::string g = std::string("/") + split;
  if (!h5_has_path(file, g)) throw H5LayoutError("group " + g + " is missing");
  H5Id group(H5_CHECK(H5Gopen2(file, g.c_str(), H5P_DEFAULT)));
  const int64_t n = h5_read_attr_i64_within(group, layout::kAttrCount, 1, kMaxPairs);
  for (const char* side : {"src", "tgt"}) {
    const std::string tokens = g + "/" + side + "_tokens", offsets = g + "/" + side + "_offsets";
    std::vector<int64_t> off = read_offsets(file, offsets, n);
    const bool src = side[0] == 's';
    scan_tokens(file, tokens, vocab, off, offsets, keep ? (src ? &keep->src_tokens : &keep->tgt_tokens) : nullptr);
    if (keep) (src ? keep->src_offsets : keep->tgt_offsets) = std::move(off);
    if (with_text)
      read_strings(file, g + "/" + side + "_text", g + "/" + side + "_text_offsets", n,
                   keep ? (src ? &keep->src_text : &keep->tgt_text) : nullptr);
  }
}

Bpe read_vocab(hid_t file) {
  const int64_t v = h5_read_attr_i64_within(file, kVocabSize, Bpe::kNumSpecials + 1, INT32_MAX);
  const std::vector<int64_t> off = read_offsets(file, "/vocab/symbol_offsets", v);
  const auto bytes_dims = h5_int_dataset_extents(file, "/vocab/symbols", 1, false, 1);
  expect_end("/vocab/symbol_offsets", off, "/vocab/symbols", bytes_dims[0]);
  std::string bytes(static_cast<size_t>(bytes_dims[0]), '\0');
  read_all(file, "/vocab/symbols", H5T_NATIVE_UINT8, reinterpret_cast<uint8_t*>(bytes.data()), bytes.size());
  std::vector<std::string> symbols;
  symbols.reserve(static_cast<size_t>(v));
  for (int64_t i = 0; i < v; ++i)
    symbols.emplace_back(bytes, static_cast<size_t>(off[static_cast<size_t>(i)]),
                         static_cast<size_t>(off[static_cast<size_t>(i) + 1] - off[static_cast<size_t>(i)]));
  const auto mdims = h5_int_dataset_extents(file, "/vocab/merges", 4, true, 2);
  if (mdims[1] != 2 || mdims[0] >= static_cast<hsize_t>(v))
    throw H5LayoutError("/vocab/merges is " + dims_text(mdims) + ", expected [M, 2] with M < vocab_size " +
                        std::to_string(v));
  std::vector<int32_t> flat(static_cast<size_t>(mdims[0] * 2));
  read_all(file, "/vocab/merges", H5T_NATIVE_INT32, flat.data(), flat.size());
  std::vector<std::pair<int32_t, int32_t>> merges(static_cast<size_t>(mdims[0]));
  for (size_t k = 0; k < merges.size(); ++k) merges[k] = {flat[2 * k], flat[2 * k + 1]};
  try {
    return make_bpe(std::move(symbols), std::move(merges));
  } catch (const std::invalid_argument& e) {
    throw H5LayoutError(std::string("/vocab: ") + e.what());
  }
}

TranslationData read_translation_file(const std::string& path, bool keep) {
  std::string hint = "; run `mlperf-dist prepare --benchmark gnmt|transformer --scale mini|reference --force` to "
                     "(re)build it";
  auto bad = [&](const std::string& why) { throw UserError("dataset " + path + ": " + why + hint, 2); };
  TranslationData d;
  try {
    H5Quiet quiet;
    H5Id file = h5_open_prepared(path);
    h5_check_layout_format(file);
    d.benchmark = h5_read_attr_str(file, layout::kAttrBenchmark);
    d.scale = h5_read_attr_str(file, layout::kAttrScale);
    hint = "; run `mlperf-dist prepare --benchmark " + d.benchmark + " --scale " + d.scale + " --force` to (re)build it";
    d.source = h5_read_attr_str(file, layout::kAttrSource);
    d.licence = h5_read_attr_str(file, layout::kAttrLicence);
    d.created_by = h5_read_attr_str(file, layout::kAttrCreatedBy);
    d.src_lang = h5_read_attr_str(file, kSrcLang);
    d.tgt_lang = h5_read_attr_str(file, kTgtLang);
    d.selection = h5_read_attr_str(file, kSelection);
    d.split_rule = h5_read_attr_str(file, kSplitRule);
    d.bpe = read_vocab(file);
    read_split(file, layout::kTrain, d.bpe.vocab_size(), false, keep ? &d.train : nullptr);
    read_split(file, kTest, d.bpe.vocab_size(), true, keep ? &d.test : nullptr);
  } catch (const H5LayoutError& e) {
    bad(e.what());
  } catch (const H5Error& e) {
    bad(std::string("unreadable or incomplete (") + e.what() + ")");
  }
  return d;
}

std::span<const int32_t> slice(const std::vector<int32_t>& tokens, const std::vector<int64_t>& offsets, int64_t i) {
  const auto b = static_cast<size_t>(offsets[static_cast<size_t>(i)]);
  const auto e = static_cast<size_t>(offsets[static_cast<size_t>(i) + 1]);
  return std::span<const int32_t>(tokens).subspan(b, e - b);
}

}  // namespace

std::span<const int32_t> TokenizedSplit::src(int64_t i) const { return slice(src_tokens, src_offsets, i); }
std::span<const int32_t> TokenizedSplit::tgt(int64_t i) const { return slice(tgt_tokens, tgt_offsets, i); }

TokenizedSplit tokenize_pairs(const Bpe& bpe, const std::vector<SentencePair>& pairs, bool keep_text) {
  TokenizedSplit s;
  s.src_offsets.reserve(pairs.size() + 1);
  s.tgt_offsets.reserve(pairs.size() + 1);
  for (const SentencePair& p : pairs) {
    const std::vector<int32_t> a = encode(bpe, p.src), b = encode(bpe, p.tgt);
    s.src_tokens.insert(s.src_tokens.end(), a.begin(), a.end());
    s.tgt_tokens.insert(s.tgt_tokens.end(), b.begin(), b.end());
    s.src_offsets.push_back(static_cast<int64_t>(s.src_tokens.size()));
    s.tgt_offsets.push_back(static_cast<int64_t>(s.tgt_tokens.size()));
    if (keep_text) {
      s.src_text.push_back(p.src);
      s.tgt_text.push_back(p.tgt);
    }
  }
  return s;
}

void write_translation_data(const std::string& path, const TranslationData& d) {
  MLPD_CHECK(d.bpe.index, "write_translation_data: the vocabulary was not built by make_bpe");
  for (const TokenizedSplit* s : {&d.train, &d.test})
    MLPD_CHECK(s->src_offsets.size() == s->tgt_offsets.size() && !s->src_offsets.empty() &&
                   s->src_offsets.back() == static_cast<int64_t>(s->src_tokens.size()) &&
                   s->tgt_offsets.back() == static_cast<int64_t>(s->tgt_tokens.size()),
               "write_translation_data: inconsistent split");
  MLPD_CHECK(d.test.src_text.size() == static_cast<size_t>(d.test.size()) &&
                 d.test.tgt_text.size() == static_cast<size_t>(d.test.size()),
             "write_translation_data: the test split needs its texts");
  write_h5_atomically(path, [&](const std::string& tmp) {
    H5Id file(H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    h5_write_attr_str(file, layout::kAttrFormat, layout::kFormatName);
    h5_write_attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
    h5_write_attr_str(file, layout::kAttrBenchmark, d.benchmark);
    h5_write_attr_str(file, layout::kAttrScale, d.scale);
    h5_write_attr_str(file, layout::kAttrSource, d.source);
    h5_write_attr_str(file, layout::kAttrLicence, d.licence);
    h5_write_attr_str(file, layout::kAttrCreatedBy, d.created_by);
    h5_write_attr_str(file, kSrcLang, d.src_lang);
    h5_write_attr_str(file, kTgtLang, d.tgt_lang);
    h5_write_attr_i64(file, kVocabSize, d.bpe.vocab_size());
    h5_write_attr_str(file, kSelection, d.selection);
    h5_write_attr_str(file, kSplitRule, d.split_rule);
    {
      H5Id g(H5_CHECK(H5Gcreate2(file, kVocab, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
      write_strings(g, "symbols", "symbol_offsets", d.bpe.symbols);
      std::vector<int32_t> flat;
      flat.reserve(2 * d.bpe.merges.size());
      for (const auto& [a, b] : d.bpe.merges) {
        flat.push_back(a);
        flat.push_back(b);
      }
      const hsize_t dims[2] = {d.bpe.merges.size(), 2};
      H5Id space(H5_CHECK(H5Screate_simple(2, dims, nullptr)));
      H5Id ds(H5_CHECK(H5Dcreate2(g, "merges", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
      if (!flat.empty()) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()));
    }
    write_split(file, layout::kTrain, d.train, false);
    write_split(file, kTest, d.test, true);
    file.close();
  });
}

TranslationData load_translation_data(const std::string& path) { return read_translation_file(path, true); }

void check_translation_data(const std::string& path) { (void)read_translation_file(path, false); }

}  // namespace mlpd
