#include "datasets/movielens.h"


#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/read_file.h"
#include "core/rng.h"
#include "datasets/h5.h"
#include "datasets/layout.h"

namespace mlpd {

namespace {

constexpr const char* kBenchmark = "ncf";
constexpr const char* kNumUsers = "num_users";
constexpr const char* kNumItems = "num_items";
constexpr const char* kEvalNegatives = "eval_negatives";
constexpr const char* kSeed = "seed";
constexpr const char* kTiedUsers = "tied_users";
constexpr const char* kDuplicates = "duplicates";
constexpr const char* kUsers = "users";
constexpr const char* kItems = "items";
constexpr const char* kNegatives = "negatives";

struct Row {
  int64_t user, item, ts;
};

std::string trim_field(std::string_view f) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '"')) f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '"' || f.back() == '\r')) f.remove_suffix(1);
  return std::string(f);
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t c = line.find(',', start);
    out.push_back(line.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start));
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  return out;
}

int64_t parse_int(std::string_view f, const std::string& path, int64_t line, const char* col) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '"')) f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '"' || f.back() == '\r')) f.remove_suffix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec != std::errc() || p != f.data() + f.size())
    throw UserError(path + ":" + std::to_string(line) + ": column " + col + " = '" + std::string(f) +
                    "' is not an integer");
  return v;
}

std::vector<Row> read_csv(const std::string& path) {
  const std::string text = read_whole_file(path, "ratings CSV");
  std::string_view all(text);
  size_t pos = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= all.size()) return false;
    size_t e = all.find('\n', pos);
    if (e == std::string_view::npos) e = all.size();
    line = all.substr(pos, e - pos);
    pos = e + 1;
    return true;
  };
  std::string_view line;
  if (!next_line(line)) throw UserError(path + ": empty file (expected a header userId,movieId,rating,timestamp)");
  auto head = split_commas(line);
  int cu = -1, ci = -1, ct = -1;
  for (size_t i = 0; i < head.size(); ++i) {
    const std::string h = trim_field(head[i]);
    if (h == "userId") cu = static_cast<int>(i);
    if (h == "movieId") ci = static_cast<int>(i);
    if (h == "timestamp") ct = static_cast<int>(i);
  }
  if (cu < 0 || ci < 0 || ct < 0)
    throw UserError(path + ":1: header '" + std::string(line) + "' lacks userId, movieId or timestamp");
  const size_t need = static_cast<size_t>(std::max({cu, ci, ct})) + 1;
  std::vector<Row> rows;
  rows.reserve(all.size() / 24);
  int64_t lineno = 1;
  while (next_line(line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    auto f = split_commas(line);
    if (f.size() < need)
      throw UserError(path + ":" + std::to_string(lineno) + ": " + std::to_string(f.size()) + " fields, expected " +
                      std::to_string(head.size()));
    Row r{parse_int(f[static_cast<size_t>(cu)], path, lineno, "userId"),
          parse_int(f[static_cast<size_t>(ci)], path, lineno, "movieId"),
          parse_int(f[static_cast<size_t>(ct)], path, lineno, "timestamp")};
    rows.push_back(r);
  }
  if (rows.empty()) throw UserError(path + ": no ratings after the header");
  return rows;
}

// Sorted unique ids and the dense index of each row's id.
std::vector<int64_t> dense_ids(const std::vector<Row>& rows, int64_t Row::*field) {
  std::vector<int64_t> ids;
  ids.reserve(rows.size());
  for (const Row& r : rows) ids.push_back(r.*field);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int32_t dense_of(const std::vector<int64_t>& ids, int64_t id) {
  return static_cast<int32_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
}

void write_i32(hid_t group, const char* name, const int32_t* data, hsize_t rows, hsize_t cols) {
  const hsize_t dims[2] = {rows, cols};
  H5Id space(H5_CHECK(H5Screate_simple(cols ? 2 : 1, dims, nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(group, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (rows) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

void write_i64(hid_t group, const char* name, const std::vector<int64_t>& v) {
  const hsize_t dims[1] = {v.size()};
  H5Id space(H5_CHECK(H5Screate_simple(1, dims, nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(group, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (!v.empty()) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
}

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string s;
  for (hsize_t d : dims) s += (s.empty() ? "[" : ", ") + std::to_string(d);
  return s + "]";
}

// Reads int32 dataset `name` after checking its extents are `shape` (as the attributes say) and
// the file holds them, then that every value is an id in [0, limit).
std::vector<int32_t> read_ids(hid_t file, const std::string& name, const std::vector<hsize_t>& shape, int64_t limit) {
  const std::vector<hsize_t> dims = h5_int_dataset_extents(file, name, 4, true, static_cast<int>(shape.size()));
  if (dims != shape) throw H5LayoutError(name + " is " + dims_text(dims) + ", the attributes say " + dims_text(shape));
  size_t n = 1;
  for (hsize_t d : dims) n *= static_cast<size_t>(d);
  std::vector<int32_t> v(n);
  H5Id ds(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  if (n > 0) H5_CHECK(H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
  for (size_t i = 0; i < n; ++i)
    if (v[i] < 0 || v[i] >= limit)
      throw H5LayoutError(name + " holds id " + std::to_string(v[i]) + " at index " + std::to_string(i) +
                          ", outside [0, " + std::to_string(limit) + ")");
  return v;
}

}  // namespace

PreparedRatings prepare_movielens(const std::string& csv_path, const std::string& out_h5,
                                  const MovieLensOptions& opts) {
  if (opts.eval_negatives < 1) throw UserError("eval_negatives must be positive");
  std::vector<Row> rows = read_csv(csv_path);
  PreparedRatings r;
  r.ratings = static_cast<int64_t>(rows.size());
  const std::vector<int64_t> user_ids = dense_ids(rows, &Row::user);
  const std::vector<int64_t> item_ids = dense_ids(rows, &Row::item);
  r.users = static_cast<int64_t>(user_ids.size());
  r.items = static_cast<int64_t>(item_ids.size());
  if (r.users > INT32_MAX || r.items > INT32_MAX) throw UserError(csv_path + ": too many users or items");
  for (Row& x : rows) {
    x.user = dense_of(user_ids, x.user);
    x.item = dense_of(item_ids, x.item);
  }
  // Repeats of a (user, item) pair: keep the latest.
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.user != b.user ? a.user < b.user : a.item != b.item ? a.item < b.item : a.ts < b.ts;
  });
  size_t w = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (w > 0 && rows[w - 1].user == rows[i].user && rows[w - 1].item == rows[i].item) {
      rows[w - 1] = rows[i];
      continue;
    }
    rows[w++] = rows[i];
  }
  r.duplicates = static_cast<int64_t>(rows.size() - w);
  rows.resize(w);
  // Per user, by time then item: the last row of each user is the held-out one (the larger item
  // id wins a tie at the latest timestamp).
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.user != b.user ? a.user < b.user : a.ts != b.ts ? a.ts < b.ts : a.item < b.item;
  });

  const int K = opts.eval_negatives;
  std::vector<int32_t> train_users, train_items, eval_items(static_cast<size_t>(r.users));
  std::vector<int32_t> negs(static_cast<size_t>(r.users) * static_cast<size_t>(K));
  train_users.reserve(rows.size());
  train_items.reserve(rows.size());
  std::vector<uint8_t> mark(static_cast<size_t>(r.items), 0);
  size_t begin = 0;
  while (begin < rows.size()) {
    const int64_t u = rows[begin].user;
    size_t end = begin;
    while (end < rows.size() && rows[end].user == u) ++end;
    const Row& last = rows[end - 1];
    if (end - begin >= 2 && rows[end - 2].ts == last.ts) ++r.tied_users;
    for (size_t i = begin; i + 1 < end; ++i) {
      train_users.push_back(static_cast<int32_t>(u));
      train_items.push_back(static_cast<int32_t>(rows[i].item));
    }
    eval_items[static_cast<size_t>(u)] = static_cast<int32_t>(last.item);
    // Negatives: distinct items the user never rated, drawn uniformly by rejection.
    const int64_t positives = static_cast<int64_t>(end - begin);
    if (r.items - positives < K)
      throw UserError(csv_path + ": user " + std::to_string(user_ids[static_cast<size_t>(u)]) + " rated " +
                      std::to_string(positives) + " of the " + std::to_string(r.items) + " items, leaving fewer than " +
                      std::to_string(K) + " to sample as evaluation negatives");
    for (size_t i = begin; i < end; ++i) mark[static_cast<size_t>(rows[i].item)] = 1;
    int32_t* out = negs.data() + static_cast<size_t>(u) * static_cast<size_t>(K);
    uint64_t counter = 0;
    for (int k = 0; k < K;) {
      const auto c = static_cast<int32_t>(rng_below(opts.seed, kEvalNegativeStream + static_cast<uint64_t>(u), counter++,
                                                    static_cast<uint64_t>(r.items)));
      if (mark[static_cast<size_t>(c)]) continue;
      mark[static_cast<size_t>(c)] = 2;
      out[k++] = c;
    }
    for (size_t i = begin; i < end; ++i) mark[static_cast<size_t>(rows[i].item)] = 0;
    for (int k = 0; k < K; ++k) mark[static_cast<size_t>(out[k])] = 0;
    begin = end;
  }
  r.train = static_cast<int64_t>(train_users.size());

  write_h5_atomically(out_h5, [&](const std::string& tmp) {
    {
      H5Id file(H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
      h5_write_attr_str(file, layout::kAttrFormat, layout::kFormatName);
      h5_write_attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
      h5_write_attr_str(file, layout::kAttrBenchmark, kBenchmark);
      h5_write_attr_str(file, layout::kAttrScale, opts.scale);
      h5_write_attr_str(file, layout::kAttrSource, opts.source.empty() ? csv_path : opts.source);
      h5_write_attr_str(file, layout::kAttrLicence, opts.licence);
      h5_write_attr_str(file, layout::kAttrCreatedBy, opts.created_by);
      h5_write_attr_i64(file, kNumUsers, r.users);
      h5_write_attr_i64(file, kNumItems, r.items);
      h5_write_attr_i64(file, kEvalNegatives, K);
      h5_write_attr_i64(file, kSeed, static_cast<int64_t>(opts.seed));
      h5_write_attr_i64(file, kTiedUsers, r.tied_users);
      h5_write_attr_i64(file, kDuplicates, r.duplicates);
      h5_write_attr_str(file, "preprocessing",
                        "implicit positives; dense ids in increasing original-id order; per user the latest rating "
                        "held out (ties at the latest timestamp: larger item id held out); distinct never-rated "
                        "evaluation negatives sampled with core/rng.h stream NEGV+user");
      write_i64(file, "user_ids", user_ids);
      write_i64(file, "item_ids", item_ids);
      {
        H5Id g(H5_CHECK(H5Gcreate2(file, layout::kTrain, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
        write_i32(g, kUsers, train_users.data(), train_users.size(), 0);
        write_i32(g, kItems, train_items.data(), train_items.size(), 0);
        h5_write_attr_i64(g, layout::kAttrCount, r.train);
      }
      {
        H5Id g(H5_CHECK(H5Gcreate2(file, layout::kEval, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
        write_i32(g, kItems, eval_items.data(), eval_items.size(), 0);
        write_i32(g, kNegatives, negs.data(), static_cast<hsize_t>(r.users), static_cast<hsize_t>(K));
        h5_write_attr_i64(g, layout::kAttrCount, r.users);
      }
      file.close();
    }
  });
  return r;
}

MovieLensData load_movielens(const std::string& path, const std::string& scale) {
  const std::string hint = "; run `mlperf-dist prepare --benchmark ncf --scale " + scale +
                           (scale == "mini" ? "`" : " --from ratings.csv`") + " to (re)build it";
  auto bad = [&](const std::string& why) { throw UserError("dataset " + path + ": " + why + hint, 2); };
  MovieLensData d;
  try {
    H5Quiet quiet;
    H5Id file = h5_open_prepared(path);
    h5_check_layout_format(file);
    if (h5_read_attr_str(file, layout::kAttrBenchmark) != kBenchmark) bad("not an ncf dataset");
    const std::string s = h5_read_attr_str(file, layout::kAttrScale);
    if (s != scale) bad("prepared for scale " + s + ", not " + scale);
    // Ids are int32. Every dataset's extents are checked against these attributes and against what
    // the file holds before anything is allocated.
    d.num_users = h5_read_attr_i64_within(file, kNumUsers, 1, INT32_MAX);
    d.num_items = h5_read_attr_i64_within(file, kNumItems, 1, INT32_MAX);
    // A user's negatives are distinct items it never rated, and it rated at least one.
    d.eval_negatives = static_cast<int>(h5_read_attr_i64_within(file, kEvalNegatives, 1, d.num_items - 1));
    H5Id train(H5_CHECK(H5Gopen2(file, layout::kTrain, H5P_DEFAULT)));
    const auto users = static_cast<hsize_t>(d.num_users);
    const auto positives = static_cast<hsize_t>(h5_read_attr_i64_within(train, layout::kAttrCount, 0, INT64_MAX));
    // Every item was rated at least once, so the file's ratings bound the model's item table.
    if (static_cast<hsize_t>(d.num_items) > positives + users)
      bad("attribute num_items is " + std::to_string(d.num_items) + " but the file holds only " +
          std::to_string(positives + users) + " ratings");
    d.train_users = read_ids(file, "/train/users", {positives}, d.num_users);
    d.train_items = read_ids(file, "/train/items", {positives}, d.num_items);
    d.eval_items = read_ids(file, "/eval/items", {users}, d.num_items);
    d.eval_negs = read_ids(file, "/eval/negatives", {users, static_cast<hsize_t>(d.eval_negatives)}, d.num_items);
  } catch (const H5LayoutError& e) {
    bad(e.what());
  } catch (const H5Error& e) {
    bad(std::string("unreadable or incomplete (") + e.what() + ")");
  }
  return d;
}

void check_movielens(const std::string& path, const std::string& scale) {
  // The loader checks every value it reads; what it returns is dropped. A run pays one extra read
  // of the file, outside the timed region (mini: milliseconds).
  (void)load_movielens(path, scale);
}

}  // namespace mlpd
