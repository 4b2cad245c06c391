// The MovieLens converter on a small ratings.csv written here: counts, dense renumbering,
// leave-one-out choice (ties at the latest timestamp: larger item id), repeats, evaluation
// negatives (distinct, never rated by the user, fixed by the seed), and the loader's checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/check.h"
#include "datasets/movielens.h"
#include "temp_dir.h"

using namespace mlpd;
namespace fs = std::filesystem;

namespace {

// Users 5, 10, 20, 30; items 100..500 and 600..609.
//   user 10: 100@5, 200@7, 300@7      -> tie at 7: the larger item (300) is held out
//   user 20: 200@1, 100@9             -> 100 held out
//   user 5:  400@3, 100@2, 500@1, 100@0 (a repeat: 100 counts once, at 2) -> 400 held out
//   user 30: 600..609 at 1..10        -> 609 held out
std::string write_csv(const TempDir& d, const std::string& name = "ratings.csv") {
  std::ofstream f(d / name);
  f << "\"userId\",\"movieId\",\"rating\",\"timestamp\"\n";
  f << "10,100,4.0,5\n10,200,3.5,7\n10,300,1,7\n";
  f << "20,200,2,1\r\n20,100,5,9\n";
  f << "5,400,3,3\n5,100,3,2\n5,500,1,1\n5,100,4.5,0\n";
  for (int i = 0; i < 10; ++i) f << "30," << 600 + i << ",4," << 1 + i << "\n";
  return d / name;
}

MovieLensOptions opts(int negatives) {
  MovieLensOptions o;
  o.scale = "mini";
  o.eval_negatives = negatives;
  o.seed = 42;
  return o;
}

TEST(MovieLens, CountsLeaveOneOutAndRenumbering) {
  TempDir d;
  const std::string csv = write_csv(d), out = d / "ncf.h5";
  PreparedRatings r = prepare_movielens(csv, out, opts(4));
  EXPECT_EQ(r.ratings, 19);
  EXPECT_EQ(r.duplicates, 1);
  EXPECT_EQ(r.users, 4);
  EXPECT_EQ(r.items, 15);
  EXPECT_EQ(r.train, 14);  // 18 distinct ratings - 4 held out
  EXPECT_EQ(r.tied_users, 1);
  MovieLensData m = load_movielens(out, "mini");
  ASSERT_EQ(m.num_users, 4);
  ASSERT_EQ(m.num_items, 15);
  ASSERT_EQ(m.eval_negatives, 4);
  // Dense ids: users 5,10,20,30 -> 0..3; items 100..500 -> 0..4, 600..609 -> 5..14.
  EXPECT_EQ(m.eval_items, (std::vector<int32_t>{3, 2, 0, 14}));
  // Training positives per user, by time.
  std::vector<std::vector<int32_t>> per(4);
  for (size_t i = 0; i < m.train_users.size(); ++i) per[m.train_users[i]].push_back(m.train_items[i]);
  EXPECT_EQ(per[0], (std::vector<int32_t>{4, 0}));  // 500@1, 100@2
  EXPECT_EQ(per[1], (std::vector<int32_t>{0, 1}));  // 100@5, 200@7 (300@7 held out)
  EXPECT_EQ(per[2], (std::vector<int32_t>{1}));
  EXPECT_EQ(per[3].size(), 9u);
}

TEST(MovieLens, NegativesAreDistinctNeverRatedAndFixedBySeed) {
  TempDir d;
  const std::string csv = write_csv(d);
  prepare_movielens(csv, d / "a.h5", opts(4));
  prepare_movielens(csv, d / "b.h5", opts(4));
  MovieLensOptions other = opts(4);
  other.seed = 43;
  prepare_movielens(csv, d / "c.h5", other);
  MovieLensData a = load_movielens(d / "a.h5", "mini"), b = load_movielens(d / "b.h5", "mini"),
                c = load_movielens(d / "c.h5", "mini");
  EXPECT_EQ(a.eval_negs, b.eval_negs) << "the same seed must give the same negatives";
  EXPECT_NE(a.eval_negs, c.eval_negs) << "another seed gave the same negatives";
  for (int64_t u = 0; u < a.num_users; ++u) {
    std::set<int32_t> rated{a.eval_items[u]};
    for (size_t i = 0; i < a.train_users.size(); ++i)
      if (a.train_users[i] == u) rated.insert(a.train_items[i]);
    std::set<int32_t> seen;
    for (int k = 0; k < a.eval_negatives; ++k) {
      const int32_t it = a.eval_negs[u * a.eval_negatives + k];
      EXPECT_TRUE(it >= 0 && it < a.num_items);
      EXPECT_EQ(rated.count(it), 0u) << "user " << u << " negative " << it << " is one of the user's positives";
      EXPECT_TRUE(seen.insert(it).second) << "user " << u << " negative " << it << " repeated";
    }
  }
  // User 30 (dense 3) rated 10 of 15 items: exactly the other 5 are possible negatives.
  for (int k = 0; k < 4; ++k) EXPECT_LT(a.eval_negs[3 * 4 + k], 5);
}

TEST(MovieLens, ErrorsNameTheProblem) {
  TempDir d;
  const std::string csv = write_csv(d);
  try {
    prepare_movielens(csv, d / "x.h5", opts(6));  // user 30 leaves only 5 unrated items
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("user 30"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(d / "x.h5"));
  {
    std::ofstream f(d / "bad.csv");
    f << "userId,movieId,rating,timestamp\n1,2,3,4\n1,x,3,5\n";
  }
  try {
    prepare_movielens(d / "bad.csv", d / "y.h5", opts(1));
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:3"), std::string::npos) << e.what();
  }
  {
    std::ofstream f(d / "nohead.csv");
    f << "user,item\n1,2\n";
  }
  EXPECT_THROW(prepare_movielens(d / "nohead.csv", d / "z.h5", opts(1)), UserError);
  prepare_movielens(csv, d / "ok.h5", opts(4));
  EXPECT_THROW(load_movielens(d / "ok.h5", "reference"), UserError);  // prepared for mini
  EXPECT_THROW(load_movielens(d / "missing.h5", "mini"), UserError);
}

}  // namespace
