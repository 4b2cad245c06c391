// MovieLens ratings for the ncf workload: a ratings CSV (userId,movieId,rating,timestamp, as
// MovieLens-20M's ratings.csv, or the `movielens` table of r-cran-dslabs exported by Rscript)
// converted under MLPerf's NCF preprocessing into the mlperf-dist HDF5 layout:
//   - every rating is an implicit positive (the rating value is ignored);
//   - users and items are renumbered densely, in increasing order of their original ids;
//   - per user, the latest interaction is held out for evaluation (leave-one-out); when several
//     interactions share the latest timestamp, the one with the LARGER item id is held out;
//   - per user, `eval_negatives` (999) distinct items the user never rated are sampled, fixed by
//     the seed (core/rng.h, stream kEvalNegativeStream + user), and stored with the data;
//   - a (user, item) pair rated twice counts once (its latest timestamp is kept).
// HDF5 layout (datasets/README.md):
//   root attrs   format, format_version, benchmark "ncf", scale, source, licence, created_by,
//                num_users, num_items, eval_negatives, seed, tied_users, duplicates
//   /train/users, /train/items   int32 [P]    training positives, by user then time
//   /eval/items                  int32 [U]    the held-out item of user u
//   /eval/negatives              int32 [U, K] user u's sampled negatives
//   /user_ids, /item_ids         int64        original ids of dense users / items
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

inline constexpr uint64_t kEvalNegativeStream = 0x4E45'4756'0000'0000ull;  // "NEGV" + user

struct MovieLensOptions {
  std::string scale = "mini";        // written to the file; the loader checks it
  std::string source;                // provenance text for the root attribute
  std::string licence;
  std::string created_by;
  int eval_negatives = 999;
  uint64_t seed = 0x4e4346;          // "NCF": fixed, so every prepare of one CSV gives one file
};

struct PreparedRatings {
  int64_t ratings = 0;     // rows read from the CSV
  int64_t duplicates = 0;  // (user, item) rows dropped as repeats
  int64_t users = 0;
  int64_t items = 0;
  int64_t train = 0;       // training positives = ratings - duplicates - users
  int64_t tied_users = 0;  // users whose latest timestamp is shared by several items
};

// Reads the CSV (header with userId, movieId and timestamp columns, in any order, quoted or not),
// converts and writes out_h5 through a temporary file renamed when complete. Throws UserError
// naming the file and line on malformed input, or when a user has fewer unrated items than
// eval_negatives.
PreparedRatings prepare_movielens(const std::string& csv_path, const std::string& out_h5,
                                  const MovieLensOptions& opts);

struct MovieLensData {
  int64_t num_users = 0;
  int64_t num_items = 0;
  int eval_negatives = 0;
  std::vector<int32_t> train_users;     // [P]
  std::vector<int32_t> train_items;     // [P]
  std::vector<int32_t> eval_items;      // [U]
  std::vector<int32_t> eval_negs;       // [U * eval_negatives]
};

// Loads and validates a prepared file: HDF5 in the mlperf-dist layout, benchmark "ncf", the given
// scale; num_users, num_items and eval_negatives within bounds (ids are int32; eval_negatives <
// num_items; num_items no more than the file's ratings); every dataset above int32 with the
// extents those attributes give, stored in full; every id in range. UserError (exit code 2) naming
// the file, the dataset or attribute at fault and the prepare command.
MovieLensData load_movielens(const std::string& path, const std::string& scale);

// The same checks without keeping the data: what a run calls before it writes anything.
void check_movielens(const std::string& path, const std::string& scale);

}  // namespace mlpd
